#!/usr/bin/env node
// bundle-cli.mjs: bundle the CLI into CommonJS files under dist/bundle/: main.cjs, the
// dispatcher (dist/cli/main.js), and one file per command (commands/<id>.cjs, from
// dist/commands/), each with everything it imports from dist/. Run by `npm run build`
// after tsc. Also egress-gateway.cjs, the gateway's program (dist/gateway.js), one
// self-contained file that build-base copies into the base image.
//
// Why (docs/PERFORMANCE.md): bin/run.cjs loads the dispatcher and the one command a
// line names. Loaded as ES modules the same code costs 15-20 ms more per command
// (node's ESM loader resolving and linking each module), and one bundle of every
// command costs a few ms more than a bundle of the command that runs. A process only
// ever loads one command's bundle, so the library's classes (errors above all) exist
// once in it. Packages stay outside, loaded when a command needs them, except valibot
// and @noble/hashes: every command that reads settings or hashes a path needs them,
// and node resolving a package's files costs more than the little of it we use.
//
// import.meta.url: CommonJS has none, so every use in a bundle becomes that file's own
// URL. The one module that finds files from it (src/lib/util/assets.ts) looks upwards
// for the package root, so it does not matter where the bundle sits.
import {build} from 'esbuild'
import {createHash} from 'node:crypto'
import {readdirSync, readFileSync, writeFileSync} from 'node:fs'
import {join, relative} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const commandsDir = join(root, 'dist', 'commands')
const fail = (message) => {
  console.error(`bundle-cli: ${message}`)
  process.exit(1)
}

const files = readdirSync(commandsDir, {recursive: true})
  .filter((f) => f.endsWith('.js'))
  .map((f) => f.slice(0, -3))
  .sort()
const {COMMAND_IDS, commandFile} = await import(join(root, 'dist', 'cli', 'main.js'))
const listed = COMMAND_IDS.map(commandFile).sort()
if (JSON.stringify(files) !== JSON.stringify(listed)) {
  fail(`COMMAND_IDS in src/cli/main.ts (${listed.join(', ')}) and the files in src/commands (${files.join(', ')}) differ`)
}

const entryPoints = [
  {in: 'dist/cli/main.js', out: 'main'},
  ...files.map((f) => ({in: `dist/commands/${f}.js`, out: `commands/${f}`})),
]
const common = {absWorkingDir: root, outdir: 'dist/bundle', outExtension: {'.js': '.cjs'}, bundle: true, platform: 'node', format: 'cjs', target: 'node20', logLevel: 'warning'}
await build({
  ...common,
  entryPoints,
  external: ['@inquirer/prompts', '@oclif/core', '@octokit/*', 'ora', 'proper-lockfile', 'undici'],
  define: {'import.meta.url': '__agentSandboxModuleUrl'},
  banner: {js: "const __agentSandboxModuleUrl = require('node:url').pathToFileURL(__filename).href;"},
})

// The gateway runs from the image with node alone: everything inside, no code cache.
await build({...common, entryPoints: [{in: 'dist/gateway.js', out: 'egress-gateway'}]})

for (const {out} of entryPoints) {
  const file = join(root, 'dist', 'bundle', `${out}.cjs`)
  const body = readFileSync(file, 'utf8')
  // A bundle runs as code compiled through a V8 code cache, where node 20 cannot
  // import(): lazy imports must go through src/lib/util/lazy-import.ts, whose one
  // import() is its fallback outside the cache.
  const imports = body.match(/\bimport\(/g) ?? []
  if (imports.length > 1) fail(`${imports.length} import() calls in ${relative(root, file)}, expected at most 1 (src/lib/util/lazy-import.ts): load packages with lazyImport()`)
  // The content hash on the first line names the bundle's V8 code cache
  // (bin/compile-cache.cjs): V8 checks a cache against the source's length only.
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 32)
  writeFileSync(file, `// agent-sandbox cli, build ${hash}\n${body}`)
}
