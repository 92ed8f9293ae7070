/**
 * Test sites for the gateway tests: a network of their own (never any other
 * address) and node servers on it, all labelled for cleanup.
 */
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {BASE_IMAGE, cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, trustWorkspace, type Result} from './helpers.js'

export function must(r: Result, what: string): Result {
  if (r.exitCode !== 0) throw new Error(`${what} failed (${r.exitCode}): ${r.stderr || r.stdout}`)
  return r
}

/** A bridge network `name` on a free 10.<second>.x.0/24, second in [from, from + 40). */
export async function createTestNetwork(name: string, label: string, from: number): Promise<{name: string; prefix: string}> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const prefix = `10.${from + Math.floor(Math.random() * 40)}.${Math.floor(Math.random() * 256)}`
    // No --ip-range: Podman's CNI pins an address only inside it. The sites take .200 and up, far from what the engine hands out first.
    const r = await docker('network', 'create', '--label', label, '--subnet', `${prefix}.0/24`, name)
    if (r.exitCode === 0) return {name, prefix}
    if (!/overlap|in use/i.test(r.stderr)) throw new Error(`docker network create failed: ${r.stderr}`)
  }
  throw new Error('no free 10.x.y.0/24 for a test network')
}

/** One self-signed certificate for the sites `names`, in a directory of its own (removeTestSites removes it). */
export function siteCertificate(prefix: string, names: string[]): {dir: string; cert: string; key: string} {
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-cert-`))
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${prefix}`, '-addext', `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], {stdio: 'ignore'})
  const [cert, key] = ['cert.pem', 'key.pem'].map((f) => readFileSync(join(dir, f), 'utf8'))
  return {dir, cert, key}
}

/**
 * A workspace owned by the test user, with `config` (plus no GitHub meta fetch) trusted, and its sandbox
 * started: its path (pushed to `workspaces`, for removeTestSites) and the sandbox's name.
 */
export async function startedWorkspace(role: string, workspaces: string[], config: Record<string, unknown>): Promise<{ws: string; container: string}> {
  const ws = await makeWorkspace(role)
  workspaces.push(ws)
  await initWorkspace(ws)
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify({...config, env: {AGENT_SANDBOX_GITHUB_META: '0'}}, null, 2)}\n`)
  await trustWorkspace(ws)
  const container = JSON.parse(must(await cli(['start', ws, '--json']), 'start').stdout).name as string
  return {ws, container}
}

/** Run `program` (node -e) as site `role` in `container` at `ip`, with NAME, CERT and KEY in its environment; wait until it listens on 443. */
export async function startTestSite(site: {container: string; label: string; network: string; role: string; ip: string; cert: string; key: string; program: string}): Promise<void> {
  const {container} = site
  must(
    await docker('run', '-d', '--name', container, '--label', site.label, '--network', site.network, '--ip', site.ip, '-e', `NAME=${site.role}`, '-e', `CERT=${site.cert}`,
      '-e', `KEY=${site.key}`, '--entrypoint', 'node', '--user', 'root', BASE_IMAGE, '-e', site.program),
    `starting ${container}`,
  )
  for (let i = 0; i < 100; i++) {
    const r = await docker('exec', container, 'node', '-e', "require('net').connect(443, '127.0.0.1').on('connect', () => process.exit(0)).on('error', () => process.exit(1))")
    if (r.exitCode === 0) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`${container} does not listen`)
}

/** After the tests: the workspaces (and their sandboxes), the labelled sites, the network and the certificates. */
export async function removeTestSites(label: string, network: string, workspaces: string[], certDir: string): Promise<void> {
  for (const path of workspaces) {
    await cleanupUnder(dirname(path))
    removeWorkspace(path)
  }
  const mine = await docker('ps', '-aq', '--filter', `label=${label}`)
  const ids = mine.stdout.split('\n').filter(Boolean)
  if (ids.length) await docker('rm', '-f', ...ids)
  if (network) await docker('network', 'rm', network)
  if (certDir) rmSync(certDir, {recursive: true, force: true})
}
