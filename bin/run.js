#!/usr/bin/env node
import {readFileSync} from 'node:fs'
import {arch, platform, release} from 'node:os'

// `shell` is the default command: `agent-sandbox` and `agent-sandbox <dir>` open a shell.
const argv = process.argv.slice(2)
const FAST_PATH = new Set(['build', 'checkout', 'exec', 'list', 'shell'])
if (argv.length === 0 || /^(\.|\/|~)/.test(argv[0])) argv.unshift('shell')

// `--version` answers without loading oclif (most of our start-up time; docs/PERFORMANCE.md).
// The line is oclif's own user agent, so the output is the same either way; on
// WSL oclif says "wsl", so there we leave it to oclif.
if (argv[0] === '--version' && !(platform() === 'linux' && /microsoft/i.test(release() + safeRead('/proc/version')))) {
  const pjson = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))
  process.stdout.write(`${pjson.name}/${pjson.version} ${platform()}-${arch() === 'ia32' ? 'x86' : arch()} node-${process.version}\n`)
} else if (!(FAST_PATH.has(argv[0]) && (await runFastPath(argv)))) {
  // oclif warns when node does not satisfy *its* engines range, which loads semver
  // (~50 modules) on every start; ours (package.json engines) is stricter anyway.
  const {execute} = await withEnv('OCLIF_DISABLE_ENGINE_WARNING', '1', () => import('@oclif/core'))
  await execute({args: argv, dir: import.meta.url})
}

// build, checkout, exec, list and shell run without oclif when their command line is one the fast
// path understands (src/cli/fast.ts); anything else falls through to oclif.
async function runFastPath(args) {
  const {runFast} = await import('../dist/cli/fast.js')
  const code = await runFast(args)
  if (code === undefined) return false
  process.exit(code)
}

function safeRead(path) {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

async function withEnv(name, value, load) {
  const before = process.env[name]
  if (before === undefined) process.env[name] = value
  try {
    return await load()
  } finally {
    if (before === undefined) delete process.env[name]
  }
}
