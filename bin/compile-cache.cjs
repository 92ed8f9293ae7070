// @ts-check
// compile-cache.cjs: require() the CLI's bundles (dist/bundle/) through a V8 code
// cache, so that node does not parse and compile them on every command: about 4 ms,
// 10% of a `list` (docs/PERFORMANCE.md). Node 22.8+ has this
// built in (module.enableCompileCache), and node 20 does not.
//
// The cache lives in $NODE_COMPILE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/agent-sandbox/compile-cache,
// one file per bundle build, node version and architecture. V8 itself refuses a
// cache made by another V8 or with other flags, but it checks the source only by
// its length, so the file is named by the bundle's content hash, which
// scripts/bundle-cli.mjs writes on the bundle's first line. Anything unexpected
// (no hash, a cache V8 refuses, a directory that cannot be written) falls back to
// a plain require; a missing or refused cache is written when the process exits.
// V8 runs the cached bytecode instead of the source, so the directory and the file
// must be the user's own and writable by no one else, or they are not used.
// NODE_DISABLE_COMPILE_CACHE=1 turns it off, as it does node's own.
'use strict'
const fs = require('node:fs')
const Module = require('node:module')
const os = require('node:os')
const path = require('node:path')
const vm = require('node:vm')

/** The build hash on the bundle's first line ("// agent-sandbox cli, build <hex>"), or undefined. */
function buildHash(source) {
  const match = /^\/\/ agent-sandbox cli, build ([0-9a-f]{16,64})\n/.exec(source.slice(0, 200))
  return match ? match[1] : undefined
}

/**
 * Where caches go, or undefined when there is nowhere sensible. Relative paths
 * are ignored (they would name a directory under whatever the current one is,
 * often a workspace a sandbox can write).
 */
function cacheDir(env) {
  if (env.NODE_COMPILE_CACHE && path.isAbsolute(env.NODE_COMPILE_CACHE)) return env.NODE_COMPILE_CACHE
  const xdg = env.XDG_CACHE_HOME && path.isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : ''
  const base = xdg || (os.homedir() ? path.join(os.homedir(), '.cache') : '')
  return base ? path.join(base, 'agent-sandbox', 'compile-cache') : undefined
}

/**
 * Whether `target` (a directory or a file) may hold code we run: ours (the
 * effective user's), of the right type, and writable by no one else. A path
 * that does not exist yet is fine: we create it 0700/0600.
 * @param {string} target
 * @param {'directory' | 'file'} kind
 */
function ours(target, kind) {
  let stat
  try {
    stat = fs.lstatSync(target)
  } catch (error) {
    return /** @type {NodeJS.ErrnoException} */ (error).code === 'ENOENT'
  }
  const rightKind = kind === 'directory' ? stat.isDirectory() : stat.isFile()
  return rightKind && typeof process.geteuid === 'function' && stat.uid === process.geteuid() && (stat.mode & 0o022) === 0
}

/** The cache file for a build of the bundle on this node. */
function cacheFile(dir, hash) {
  return path.join(dir, `cli-${hash}-${process.version}-${process.arch}.cache`)
}

/**
 * Load a CommonJS file as require() would, through the code cache where it can;
 * returns its exports. A missing or refused cache is written at exit.
 * @param {string} file
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {any}
 */
function requireCached(file, env = process.env) {
  if (env.NODE_DISABLE_COMPILE_CACHE || typeof process.geteuid !== 'function') return require(file)
  // A cache directory someone else could write is a way to run code as you: not used.
  const found = cacheDir(env)
  const dir = found && ours(found, 'directory') ? found : undefined
  // Node 22.8+: node's own compile cache, for this and everything loaded after it.
  if (typeof Module.enableCompileCache === 'function') {
    if (dir) Module.enableCompileCache(dir)
    return require(file)
  }
  let source
  try {
    source = fs.readFileSync(file, 'utf8')
  } catch {
    return require(file)
  }
  const hash = buildHash(source)
  if (!dir || !hash) return require(file)
  const target = cacheFile(dir, hash)
  if (!ours(target, 'file')) return require(file)
  let cachedData
  try {
    cachedData = fs.readFileSync(target)
  } catch {
    cachedData = undefined
  }
  const script = new vm.Script(Module.wrap(source), {filename: file, cachedData})
  // Code compiled by vm cannot import() in node 20 without an experimental flag:
  // the bundle's lazy imports (src/lib/util/lazy-import.ts) go through this, ordinary CommonJS.
  globalThis[Symbol.for('agent-sandbox.import')] = (specifier) => import(specifier)
  const mod = {exports: {}}
  script.runInThisContext().call(mod.exports, mod.exports, Module.createRequire(file), mod, file, path.dirname(file))
  if (cachedData === undefined || script.cachedDataRejected) {
    // At exit, so that the cache holds the functions this command compiled too.
    process.once('exit', () => writeCache(script, dir, target))
  }
  return mod.exports
}

/** Caches written this long ago are dropped when another is written (one still in use is simply written again). */
const EXPIRE_MS = 30 * 24 * 3600 * 1000

/** Write the cache atomically (temp file, rename), and drop expired ones. Never throws. */
function writeCache(script, dir, target) {
  try {
    fs.mkdirSync(dir, {recursive: true, mode: 0o700})
    const temp = `${target}.${process.pid}.tmp`
    fs.writeFileSync(temp, script.createCachedData(), {mode: 0o600})
    fs.renameSync(temp, target)
    const now = Date.now()
    for (const name of fs.readdirSync(dir)) {
      const file = path.join(dir, name)
      if (name.startsWith('cli-') && file !== target && now - fs.statSync(file).mtimeMs > EXPIRE_MS) fs.rmSync(file, {force: true})
    }
  } catch {
    // A read-only or full cache directory only means the next start compiles again.
  }
}

module.exports = {requireCached, buildHash, cacheDir, cacheFile, ours}
