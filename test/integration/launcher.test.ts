/**
 * The launcher (bin/agent-sandbox) and NODE_EXTRA_CA_CERTS, against the real
 * engine: node starts without the file (node 20 parses it at start-up, about
 * 55 ms, on every command: docs/PERFORMANCE.md), every child process gets the
 * variable back unchanged, and the TLS connections the CLI opens itself still
 * trust it, here an engine behind TLS with a certificate from a CA of the
 * test's own.
 */
import {execa} from 'execa'
import {chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import type {NetConnectOpts} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BIN, cleanupUnder, cli, ENTRY, initWorkspace, makeWorkspace, removeWorkspace} from './helpers.js'
import {makeTestCa, tlsRelay, type Relay, type TestCa} from './tls-helpers.js'

const oneLine = (text: string) => text.trim().split('\n').filter(Boolean)

/** Where the engine the tests use listens, for the relay to pass connections on to. */
function engineAddress(dockerHost = 'unix:///var/run/docker.sock'): NetConnectOpts {
  if (dockerHost.startsWith('unix://')) return {path: dockerHost.slice('unix://'.length)}
  if (dockerHost.startsWith('/')) return {path: dockerHost}
  const tcp = /^tcp:\/\/\[?([^\]]+?)\]?:(\d+)$/.exec(dockerHost)
  if (tcp) return {host: tcp[1], port: Number(tcp[2])}
  throw new Error(`these tests relay to a unix socket or plain tcp:// engine, not DOCKER_HOST=${dockerHost}`)
}

let dir: string
let ca: TestCa
let relay: Relay

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'asb-launcher-'))
  ca = await makeTestCa(dir)
  // The engine's API over TLS: what DOCKER_HOST=https://… reaches.
  relay = await tlsRelay(ca, engineAddress(process.env.DOCKER_HOST))
})

afterAll(async () => {
  await relay?.close()
  rmSync(dir, {recursive: true, force: true})
})

describe('the launcher', () => {
  it('starts node without NODE_EXTRA_CA_CERTS: node itself would read the file first thing', async () => {
    const missing = join(dir, 'no-such-ca.pem')
    // Control: node started on the entry directly reads the file at start-up, and says it cannot.
    const direct = await execa('node', [ENTRY, '--version'], {env: {NODE_EXTRA_CA_CERTS: missing}, reject: false})
    expect(direct.exitCode).toBe(0)
    expect(direct.stderr).toContain(`Ignoring extra certs from \`${missing}\``)
    const launched = await execa(BIN, ['--version'], {env: {NODE_EXTRA_CA_CERTS: missing}, reject: false})
    expect(launched.exitCode).toBe(0)
    expect(launched.stdout).toBe(direct.stdout)
    expect(launched.stderr).toBe('')
  })

  it('gives child processes the user\'s NODE_EXTRA_CA_CERTS back, and nothing of its own', async () => {
    const ws = await makeWorkspace('launcher')
    try {
      await initWorkspace(ws)
      expect((await cli(['start', ws])).exitCode).toBe(0)
      // `shell` hands the terminal to the engine's CLI: a stand-in records the environment it got.
      const seen = join(dir, 'env.txt')
      const standIn = join(dir, 'docker-cli')
      writeFileSync(standIn, `#!/bin/sh\nenv > '${seen}'\n`)
      chmodSync(standIn, 0o755)
      const value = join(dir, 'corp ca.pem')
      const r = await cli(['shell', ws], {env: {NODE_EXTRA_CA_CERTS: value, AGENT_SANDBOX_DOCKER_CLI: standIn}})
      expect(r.exitCode, r.stderr).toBe(0)
      const env = readFileSync(seen, 'utf8').split('\n')
      expect(env).toContain(`NODE_EXTRA_CA_CERTS=${value}`)
      expect(env.filter((line) => line.startsWith('AGENT_SANDBOX_DEFERRED_CA_CERTS='))).toEqual([])
    } finally {
      await cleanupUnder(ws)
      removeWorkspace(ws)
    }
  })
})

describe('an engine behind TLS, trusted through NODE_EXTRA_CA_CERTS', () => {
  const host = () => `https://127.0.0.1:${relay.port}`

  it('lists and execs (input in, output and exit code out) through the relay', async () => {
    const ws = await makeWorkspace('tlsengine')
    try {
      await initWorkspace(ws)
      expect((await cli(['start', ws])).exitCode).toBe(0)
      const env = {DOCKER_HOST: host(), NODE_EXTRA_CA_CERTS: ca.caFile}
      const list = await cli(['list', '--json'], {env})
      expect(list.exitCode, list.stderr).toBe(0)
      expect(JSON.parse(list.stdout).map((row: {path: string}) => row.path)).toContain(ws)
      const exec = await cli(['exec', ws, '--', 'sh', '-c', 'cat; echo done >&2; exit 4'], {env, input: 'over tls\n'})
      expect(exec).toEqual({exitCode: 4, stdout: 'over tls', stderr: 'done'})
    } finally {
      await cleanupUnder(ws)
      removeWorkspace(ws)
    }
  })

  it('without the CA, fails in one line naming the handshake, with exit 3', async () => {
    const r = await cli(['list', '--json'], {env: {DOCKER_HOST: host(), NODE_EXTRA_CA_CERTS: undefined}})
    expect(r.exitCode).toBe(3)
    expect(r.stdout).toBe('')
    expect(oneLine(r.stderr)).toEqual([
      `agent-sandbox: error: the TLS handshake with the container engine at ${host()} failed: unable to verify the first certificate (hint: give the engine's CA as ca.pem in DOCKER_CERT_PATH (with cert.pem and key.pem), or add it to the file NODE_EXTRA_CA_CERTS names)`,
    ])
  })
})
