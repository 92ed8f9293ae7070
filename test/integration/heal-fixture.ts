/**
 * A whole sandbox to break from outside (heal.test.ts, engine-restart.test.ts):
 * a bind-mode workspace with a repository (so a push gate) and network
 * firewall (so an egress gateway), allowlisting one test site of its own on a
 * network of its own (never any other address). `check` is what the user
 * does after a fault: the next ordinary command, then the web through the
 * gateway, `git push host`, and `doctor`; each must pass.
 */
import {randomBytes} from 'node:crypto'
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'vitest'
import {cli, initWorkspace, makeWorkspace, run, TEST_UID, trustWorkspace} from './helpers.js'
import {createTestNetwork, must, removeTestSites, startTestSite} from './test-sites.js'

/** HTTP on 80 (and HTTPS on 443, which startTestSite waits for): answers with its NAME and the path. */
const SITE = `const http = require('http'), https = require('https');
const answer = (q, r) => r.end('hi from ' + process.env.NAME + ' ' + q.url + '\\n');
http.createServer(answer).listen(80, '::');
https.createServer({cert: process.env.CERT, key: process.env.KEY}, answer).listen(443, '::');`

/** What the git wrapper says inside when the gate does not listen (git-wrapper.sh push_to_host). */
export const GATE_DOWN_LINE =
  'agent-sandbox: git push host: the push gate is down, so nothing reaches the host; any agent-sandbox command on the host (e.g. agent-sandbox exec -- true) repairs it'

export interface HealFixture {
  ws: string
  sandbox: string
  gate: string
  gateway: string
  /** The test's own web site (a container on the test network). */
  site: string
  /** After a fault: the next `exec`, then web, push and doctor. Returns the `exec`'s stderr (its repair lines). */
  check(tag: string): Promise<string>
  cleanup(): Promise<void>
}

/** The lines of a command's stderr that report a repair (lifecycle.ts, health.ts repairLine). */
export function repairLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.includes('repairing '))
}

export async function healFixture(role: string): Promise<HealFixture> {
  const id = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
  const label = `dev.agent-sandbox.healit=${id}`
  const site = `${role}-site-${id}`
  const workspaces: string[] = []
  let network = ''
  let certDir = ''
  const cleanup = () => removeTestSites(label, network, workspaces, certDir)
  try {
    const net = await createTestNetwork(`${role}-net-${id}`, label, 150)
    network = net.name
    certDir = mkdtempSync(join(tmpdir(), `${role}-cert-`))
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${role}`, '-keyout', join(certDir, 'key.pem'), '-out', join(certDir, 'cert.pem')], {stdio: 'ignore'})
    const [cert, key] = ['cert.pem', 'key.pem'].map((f) => readFileSync(join(certDir, f), 'utf8'))
    await startTestSite({container: site, label, network, role: 'site', ip: `${net.prefix}.200`, cert, key, program: SITE})
    const ws = await makeWorkspace(role)
    workspaces.push(ws)
    await initWorkspace(ws)
    const config = {dockerNetwork: network, allowDomains: [site], env: {AGENT_SANDBOX_GITHUB_META: '0'}}
    writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify(config, null, 2)}\n`)
    await trustWorkspace(ws)
    const sandbox = JSON.parse(must(await cli(['start', ws, '--json']), 'start').stdout).name as string
    must(await cli(['exec', ws, '--', 'sh', '-c', 'git config user.name Agent && git config user.email agent@example.invalid']), 'git identity')
    // The host's own git, as the workspace's owner.
    const hostGit = async (...args: string[]) =>
      must(await run('setpriv', ['--reuid', String(TEST_UID), '--regid', String(TEST_UID), '--clear-groups', 'git', '-C', ws, ...args]), `host git ${args.join(' ')}`).stdout.trim()
    const check = async (tag: string): Promise<string> => {
      const next = await cli(['exec', ws, '--', 'true'])
      expect(next.exitCode, `the next exec after ${tag}: ${next.stderr}`).toBe(0)
      const web = await cli(['exec', ws, '--', 'curl', '-sS', '--max-time', '10', `http://${site}/${tag}`])
      expect(web.stdout, `web after ${tag}: ${web.stderr}`).toBe(`hi from site /${tag}`)
      const push = await cli(['exec', ws, '--', 'sh', '-c', `git commit -q --allow-empty -m ${tag} && git push -q host HEAD:refs/heads/${tag} && git rev-parse HEAD`])
      expect(push.exitCode, `git push host after ${tag}: ${push.stderr}`).toBe(0)
      expect(await hostGit('rev-parse', `refs/heads/${tag}`)).toBe(push.stdout.trim())
      const doctor = await cli(['doctor', ws, '--json'])
      const rows = JSON.parse(doctor.stdout).checks as Array<{name: string; status: string; detail: string}>
      expect(rows.filter((r) => r.status === 'fail'), `doctor after ${tag}`).toEqual([])
      expect(doctor.exitCode).toBe(0)
      expect(rows.filter((r) => r.name.startsWith('sidecar-')).map((r) => [r.name, r.status])).toEqual([
        ['sidecar-gate', 'pass'],
        ['sidecar-gateway', 'pass'],
      ])
      return next.stderr
    }
    return {ws, sandbox, gate: `${sandbox}-gate`, gateway: `${sandbox}-gateway`, site, check, cleanup}
  } catch (error) {
    await cleanup()
    throw error
  }
}
