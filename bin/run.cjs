#!/usr/bin/env node
// The CLI's entry: `agent-sandbox` (bin/agent-sandbox) runs it with node, and so
// can you (`node bin/run.cjs …`). CommonJS on purpose: every command runs from
// CommonJS bundles (dist/bundle/: the dispatcher, src/cli/main.ts, and the command's own), and loading it without
// node's ESM loader is 15-20 ms faster (docs/PERFORMANCE.md). Help, topics and
// unknown commands go to oclif.
'use strict'
const {readFileSync} = require('node:fs')
const {arch, platform, release} = require('node:os')
const {join} = require('node:path')

// The launcher started node without NODE_EXTRA_CA_CERTS, which node 20 parses at
// start-up; put it back, so that every child process sees the user's environment.
// Our own TLS clients trust the file explicitly (src/lib/util/tls.ts).
if (process.env.AGENT_SANDBOX_DEFERRED_CA_CERTS !== undefined) {
  process.env.NODE_EXTRA_CA_CERTS = process.env.AGENT_SANDBOX_DEFERRED_CA_CERTS
  delete process.env.AGENT_SANDBOX_DEFERRED_CA_CERTS
}

// Deprecation warnings from packages we use are for their authors, not for you
// (oclif's and the prompt library's dependencies); AGENT_SANDBOX_DEBUG shows them.
if (!process.env.AGENT_SANDBOX_DEBUG) process.noDeprecation = true

// `shell` is the default command: `agent-sandbox` and `agent-sandbox <dir>` open a shell.
const argv = process.argv.slice(2)
if (argv.length === 0 || /^(\.|\/|~)/.test(argv[0])) argv.unshift('shell')

// `--version` answers without loading oclif (most of our start-up time; docs/PERFORMANCE.md).
// The line is oclif's own user agent, so the output is the same either way; on
// WSL oclif says "wsl", so there we leave it to oclif.
if (argv[0] === '--version' && !(platform() === 'linux' && /microsoft/i.test(release() + safeRead('/proc/version')))) {
  const pjson = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8'))
  process.stdout.write(`${pjson.name}/${pjson.version} ${platform()}-${arch() === 'ia32' ? 'x86' : arch()} node-${process.version}\n`)
} else {
  // The dispatcher runs the command, or resolves to undefined to leave the line to oclif.
  // Through a V8 code cache: compiling the bundle is a tenth of a warm command (bin/compile-cache.cjs).
  const {requireCached} = require('./compile-cache.cjs')
  const bundles = join(__dirname, '..', 'dist', 'bundle')
  requireCached(join(bundles, 'main.cjs'))
    .runCli(argv, (file) => requireCached(join(bundles, 'commands', `${file}.cjs`)).default)
    .then((code) => (code === undefined ? runOclif() : process.exit(code)))
}

async function runOclif() {
  // oclif warns when node does not satisfy *its* engines range, which loads semver
  // (~50 modules) on every start; ours (package.json engines) is stricter anyway.
  const before = process.env.OCLIF_DISABLE_ENGINE_WARNING
  if (before === undefined) process.env.OCLIF_DISABLE_ENGINE_WARNING = '1'
  let oclif
  try {
    oclif = await import('@oclif/core')
  } finally {
    if (before === undefined) delete process.env.OCLIF_DISABLE_ENGINE_WARNING
  }
  await oclif.execute({args: argv, dir: __filename})
}

function safeRead(path) {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}
