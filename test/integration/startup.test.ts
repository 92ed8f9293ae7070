/**
 * Start-up cost guards (docs/PERFORMANCE.md): which modules a command loads.
 * A tiny loader records every module node resolves (ESM hooks, and CJS
 * require) while the built CLI runs; the heavy ones must stay out of the
 * commands that do not need them. No timings here: speed is the benchmark's.
 */
import {execa} from 'execa'
import {chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import Module from 'node:module'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, ENTRY, cli, makeWorkspace, removeWorkspace, REPO} from './helpers.js'

let dir: string
let register: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'agent-sandbox-startup-'))
  writeFileSync(
    join(dir, 'hooks.mjs'),
    `import {appendFileSync} from 'node:fs'
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context)
  appendFileSync(process.env.AGENT_SANDBOX_LOAD_LOG, result.url + '\\n')
  return result
}
`,
  )
  writeFileSync(
    join(dir, 'register.mjs'),
    `import Module, {register} from 'node:module'
import {appendFileSync} from 'node:fs'
register(${JSON.stringify(pathToFileURL(join(dir, 'hooks.mjs')).href)})
const resolveFilename = Module._resolveFilename
Module._resolveFilename = function (...args) {
  const file = resolveFilename.apply(this, args)
  appendFileSync(process.env.AGENT_SANDBOX_LOAD_LOG, file + '\\n')
  return file
}
`,
  )
  register = pathToFileURL(join(dir, 'register.mjs')).href
})

afterAll(() => {
  rmSync(dir, {recursive: true, force: true})
})

/** Run the CLI with the loader; resolves with its output and the modules it loaded. */
async function loaded(args: string[]): Promise<{stdout: string; exitCode: number; modules: string[]}> {
  const log = join(dir, `load-${args.join('_').replace(/\W/g, '')}.log`)
  writeFileSync(log, '')
  // The code cache loads the bundle through vm, which the hooks cannot see: off here (its own tests are below).
  const r = await execa('node', ['--import', register, ENTRY, ...args], {cwd: REPO, env: {AGENT_SANDBOX_LOAD_LOG: log, NODE_DISABLE_COMPILE_CACHE: '1'}, reject: false, stdin: 'ignore'})
  return {stdout: r.stdout, exitCode: r.exitCode ?? -1, modules: readFileSync(log, 'utf8').split('\n').filter(Boolean)}
}

const OCLIF = /node_modules\/@oclif\//
const HEAVY = /node_modules\/(dockerode|docker-modem|ssh2|@grpc|protobufjs|execa|@inquirer|ora)\//

describe('start-up', () => {
  it('--version prints oclif\'s own version line without loading oclif at all', async () => {
    const {Config} = await import('@oclif/core')
    const config = await Config.load(REPO)
    const r = await loaded(['--version'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toBe(config.userAgent)
    expect(r.modules.filter((m) => m.includes('/node_modules/'))).toEqual([])
  })

  it('--help loads oclif but no engine client, subprocess library or prompt', async () => {
    const r = await loaded(['--help'])
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toMatch(/USAGE/)
    // The loader sees oclif (so an empty list below would not mean a blind loader).
    expect(r.modules.some((m) => m.includes('node_modules/@oclif/core/'))).toBe(true)
    expect(r.modules.filter((m) => HEAVY.test(m))).toEqual([])
  })

  it('list runs from the dispatcher and its own bundle and loads no package at all', async () => {
    const r = await loaded(['list', '--json'])
    expect(r.exitCode).toBe(0)
    expect(Array.isArray(JSON.parse(r.stdout))).toBe(true)
    // Two CommonJS bundles (scripts/bundle-cli.mjs), no ES module of ours, nothing from node_modules.
    expect(r.modules.filter((m) => m.includes('/dist/'))).toEqual([join(REPO, 'dist/bundle/main.cjs'), join(REPO, 'dist/bundle/commands/list.cjs')])
    expect(r.modules.filter((m) => m.includes('/node_modules/'))).toEqual([])
  })

  it('config and stop run without oclif and load no package (the schema library is in the bundle)', async () => {
    const config = await loaded(['config', '--json'])
    expect(config.exitCode).toBe(0)
    expect(JSON.parse(config.stdout).settings.baseTag).toBe('latest')
    expect(config.modules.filter((m) => m.includes('/dist/'))).toEqual([join(REPO, 'dist/bundle/main.cjs'), join(REPO, 'dist/bundle/commands/config.cjs')])
    expect(config.modules.filter((m) => m.includes('/node_modules/'))).toEqual([])
    const stop = await loaded(['stop', dir])
    expect(stop.exitCode).toBe(0)
    expect(stop.modules.filter((m) => m.includes('/node_modules/') || OCLIF.test(m))).toEqual([])
  })

  it('a usage error comes from the command\'s own definition, without oclif', async () => {
    const r = await loaded(['start', '--network', 'sideways'])
    expect(r.exitCode).toBe(2)
    expect(r.modules.filter((m) => OCLIF.test(m))).toEqual([])
  })

  // The commands run most often.
  it('a warm exec loads no package (not even the schema library, for the lifecycle module), a no-op build and a run no oclif', async () => {
    const ws = await makeWorkspace('fastpath')
    try {
      expect((await cli(['init', ws])).exitCode).toBe(0)
      expect((await cli(['start', ws])).exitCode).toBe(0)
      const exec = await loaded(['exec', ws, '--', 'sh', '-c', 'echo ok; exit 3'])
      expect(exec.stdout).toBe('ok')
      expect(exec.exitCode).toBe(3)
      expect(exec.modules.filter((m) => m.includes('/dist/'))).toEqual([join(REPO, 'dist/bundle/main.cjs'), join(REPO, 'dist/bundle/commands/exec.cjs')])
      expect(exec.modules.filter((m) => m.includes('/node_modules/'))).toEqual([])
      const build = await loaded(['build', ws])
      expect(build.exitCode).toBe(0)
      expect(build.stdout).toMatch(/^agent-sandbox-fastpath-[0-9a-f]{32}:latest$/)
      expect(build.modules.filter((m) => HEAVY.test(m) || OCLIF.test(m))).toEqual([])
      // A one-shot run too (its settings need the schema, but not oclif).
      const oneShot = await loaded(['run', ws, '--', 'sh', '-c', 'echo once; exit 4'])
      expect(oneShot.stdout).toBe('once')
      expect(oneShot.exitCode).toBe(4)
      expect(oneShot.modules.filter((m) => m.includes('/dist/'))).toEqual([join(REPO, 'dist/bundle/main.cjs'), join(REPO, 'dist/bundle/commands/run.cjs')])
      expect(oneShot.modules.filter((m) => HEAVY.test(m) || OCLIF.test(m))).toEqual([])
      // Help is oclif's.
      const help = await loaded(['exec', '--help'])
      expect(help.exitCode).toBe(0)
      expect(help.modules.some((m) => OCLIF.test(m))).toBe(true)
    } finally {
      await cleanupUnder(ws)
      removeWorkspace(ws)
    }
  })

  // bin/compile-cache.cjs: the bundles through a V8 code cache (node 20; node 22.1+ has its own).
  describe('the bundles\' code cache', () => {
    const builtin = typeof (Module as unknown as {enableCompileCache?: unknown}).enableCompileCache === 'function'
    const bundleHash = (bundle = 'commands/list.cjs') => /^\/\/ agent-sandbox cli, build ([0-9a-f]+)\n/.exec(readFileSync(join(REPO, 'dist', 'bundle', bundle), 'utf8'))?.[1]
    const listJson = (env: Record<string, string | undefined>) => cli(['list', '--json'], {env})
    /** Run `test` with a cache home of its own, removed afterwards. */
    const withHome = async (test: (home: string) => Promise<void>) => {
      const home = mkdtempSync(join(tmpdir(), 'asb-cc-'))
      try {
        await test(home)
      } finally {
        rmSync(home, {recursive: true, force: true})
      }
    }

    it('is written on first use, taken as it is after, and changes nothing the command prints', () =>
      withHome(async (home) => {
        const env = {XDG_CACHE_HOME: home}
        const plain = await listJson({NODE_DISABLE_COMPILE_CACHE: '1', XDG_CACHE_HOME: home})
        expect(plain.exitCode, plain.stderr).toBe(0)
        const dir = join(home, 'agent-sandbox', 'compile-cache')
        expect(existsSync(dir)).toBe(false)
        const first = await listJson(env)
        expect(first).toEqual(plain)
        const file = join(dir, `cli-${bundleHash()}-${process.version}-${process.arch}.cache`)
        if (builtin) {
          expect(readdirSync(dir).length).toBeGreaterThan(0)
          return
        }
        // One for the dispatcher, one for the command.
        const main = `cli-${bundleHash('main.cjs')}-${process.version}-${process.arch}.cache`
        expect(readdirSync(dir).sort()).toEqual([file.split('/').at(-1), main].sort())
        expect(statSync(file).mode & 0o777).toBe(0o600)
        expect(statSync(dir).mode & 0o777).toBe(0o700)
        const written = statSync(file).mtimeMs
        const second = await listJson(env)
        expect(second).toEqual(plain)
        // V8 took it: nothing was written again.
        expect(statSync(file).mtimeMs).toBe(written)
      }))

    it('replaces a cache V8 refuses, and runs without one where none can be written', () =>
      withHome(async (home) => {
        const plain = await listJson({NODE_DISABLE_COMPILE_CACHE: '1'})
        const dir = join(home, 'agent-sandbox', 'compile-cache')
        mkdirSync(dir, {recursive: true})
        const file = join(dir, `cli-${bundleHash()}-${process.version}-${process.arch}.cache`)
        writeFileSync(file, 'not a code cache')
        expect(await listJson({XDG_CACHE_HOME: home})).toEqual(plain)
        if (!builtin) expect(readFileSync(file, 'utf8')).not.toBe('not a code cache')
        // A cache home that is a file: nothing can be written, and nothing is said about it.
        const blocked = join(home, 'a-file')
        writeFileSync(blocked, '')
        expect(await listJson({XDG_CACHE_HOME: blocked})).toEqual(plain)
      }))

    it('neither reads nor writes a cache directory or file that someone else could write', () =>
      withHome(async (home) => {
        const plain = await listJson({NODE_DISABLE_COMPILE_CACHE: '1'})
        const dir = join(home, 'agent-sandbox', 'compile-cache')
        mkdirSync(dir, {recursive: true})
        chmodSync(dir, 0o777)
        expect(await listJson({XDG_CACHE_HOME: home})).toEqual(plain)
        expect(readdirSync(dir)).toEqual([])
        // A private directory, but a planted cache file of another user's: left alone.
        chmodSync(dir, 0o700)
        const file = join(dir, `cli-${bundleHash()}-${process.version}-${process.arch}.cache`)
        writeFileSync(file, 'planted', {mode: 0o600})
        chownSync(file, 1234, 1234)
        expect(await listJson({XDG_CACHE_HOME: home})).toEqual(plain)
        expect(readFileSync(file, 'utf8')).toBe('planted')
      }))

    it('lets the bundle import lazily, with and without the cache (node:https for an https:// engine)', () =>
      withHome(async (home) => {
        // Nothing listens on port 1: the engine error proves node:https was imported and tried.
        const env = {XDG_CACHE_HOME: home, DOCKER_HOST: 'https://127.0.0.1:1'}
        for (const round of ['no cache yet', 'cache taken']) {
          const r = await listJson(env)
          expect(r.exitCode, round).toBe(3)
          // One line: no warning from node about vm imports.
          expect(r.stderr.split('\n'), round).toEqual([
            "agent-sandbox: error: the container engine at https://127.0.0.1:1 refused the connection (ECONNREFUSED) (hint: check that the engine is running (`docker info`) and that DOCKER_HOST is right)",
          ])
        }
      }))
  })
})

