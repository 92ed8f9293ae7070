/**
 * The egress gateway against request smuggling, with the built CLI, a real
 * engine and the real firewall: from inside a sandbox, raw requests go to a
 * site of our own that records every byte it receives, over plain HTTP and
 * over intercepted TLS (a masked secret is declared for it). No bytes may
 * reach it unless they belong to a request the gateway judged or to a tunnel
 * the site accepted with a 101; each refusal is in `firewall log`; each has
 * its legitimate twin (keep-alive reuse, a real WebSocket, a chunked upload).
 * A client with its own pinned trust store works against an allowlisted host
 * with neither rules nor secrets (passed through), and fails there with
 * gateway.inspectAll. Only this file's own containers are addressed.
 */
import {execFileSync} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cli, docker, initWorkspace, makeWorkspace, sbx, trustWorkspace} from './helpers.js'
import {createTestNetwork, must, removeTestSites, startTestSite} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.gwsit=${RUN}`
const name = (role: string) => `gwsit-${role}-${RUN}`
const site = name('site')
const open = name('open')
/** A name on no allowlist: what smuggled requests try to reach through the site's connection. */
const EVIL = name('evil')
const TOKEN = `sk-gws-${randomBytes(12).toString('hex')}`

/**
 * The site, on 80 and 443: appends every byte it receives (decrypted) to /tmp/raw; answers
 * `METHOD url host=… upgrade=…`, `got N` for an upload to /upload; on an Upgrade, /ws switches
 * (101) and echoes (a WebSocket text frame as a frame, raw bytes raw), /nows answers 200, /nows-chunked 400 with a chunked body, /nows-close 403 and closes.
 */
const SITE = `const fs = require('fs'), http = require('http'), https = require('https');
const record = (s) => s.on('data', (d) => fs.appendFileSync('/tmp/raw', d));
const answer = (q, r) => {
  if (q.url === '/upload') { let n = 0; q.on('data', (c) => (n += c.length)); return q.on('end', () => r.end('got ' + n)) }
  q.resume(); r.end(q.method + ' ' + q.url + ' host=' + q.headers.host + ' upgrade=' + (q.headers.upgrade || ''));
};
const upgrade = (q, s) => {
  s.on('error', () => {});
  if (q.url === '/ws') {
    const accept = require('crypto').createHash('sha1').update(q.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
    s.write('HTTP/1.1 101 Switching Protocols\\r\\nupgrade: websocket\\r\\nconnection: Upgrade\\r\\nsec-websocket-accept: ' + accept + '\\r\\n\\r\\n');
    // A client's masked text frame (short) is answered with a text frame; any other bytes are echoed raw.
    return s.on('data', (d) => {
      if (d.length >= 6 && d[0] === 0x81 && d[1] & 0x80 && (d[1] & 0x7f) < 126) {
        const mask = d.subarray(2, 6);
        const text = Buffer.concat([Buffer.from('echo:'), Buffer.from(d.subarray(6, 6 + (d[1] & 0x7f)).map((b, i) => b ^ mask[i % 4]))]);
        return s.write(Buffer.concat([Buffer.from([0x81, text.length]), text]));
      }
      s.write(Buffer.concat([Buffer.from('echo:'), d]));
    });
  }
  if (q.url === '/nows-chunked') return s.write('HTTP/1.1 400 Bad Request\\r\\ntransfer-encoding: chunked\\r\\n\\r\\n5\\r\\nnope!\\r\\n0\\r\\n\\r\\n');
  if (q.url === '/nows-close') return s.end('HTTP/1.1 403 Forbidden\\r\\ncontent-length: 5\\r\\nconnection: close\\r\\n\\r\\nnope!');
  s.write('HTTP/1.1 200 OK\\r\\ncontent-length: 5\\r\\n\\r\\nnope!');
};
http.createServer(answer).on('connection', record).on('upgrade', upgrade).listen(80, '::');
https.createServer({cert: process.env.CERT, key: process.env.KEY}, answer).on('secureConnection', record).on('upgrade', upgrade).listen(443, '::');`

/**
 * The raw client, run inside the sandbox as the agent: for each case of the JSON in argv[1]
 * ({mode, host, parts, until?}), connect (port 80, or 443 trusting the system bundle, which holds the
 * sandbox's CA), write the parts and read until the gateway closes (or `until` arrives); one JSON line per case.
 * @BIG@ and @MANY@ stand for an oversized header value and 2500 header fields.
 */
const CLIENT = `const net = require('net'), tls = require('tls'), fs = require('fs');
const ca = fs.readFileSync('/etc/ssl/certs/ca-certificates.crt');
const one = (c) => new Promise((resolve) => {
  const s = c.mode === 'plain' ? net.connect(80, c.host) : tls.connect({port: 443, host: c.host, servername: c.host, ca, ALPNProtocols: ['http/1.1']});
  let text = '';
  const timer = setTimeout(() => { s.destroy(); resolve(text + '[open]') }, 15000);
  s.on(c.mode === 'plain' ? 'connect' : 'secureConnect', () => { for (const p of c.parts) s.write(p.replace('@BIG@', 'a'.repeat(20000)).replace('@MANY@', 'a:b\\r\\n'.repeat(2500))) });
  s.on('data', (d) => { text += d.toString('latin1'); if (c.until && text.includes(c.until)) s.destroy() });
  s.on('close', () => { clearTimeout(timer); resolve(text) });
  s.on('error', (e) => (text += '[error ' + e.code + ']'));
});
(async () => { for (const c of JSON.parse(process.argv[1])) console.log(JSON.stringify(await one(c))) })();`

let network = ''
let certDir = ''
let caPem = ''
const workspaces: string[] = []
let ws = ''

afterAll(() => removeTestSites(LABEL, network, workspaces, certDir))

beforeAll(async () => {
  const net = await createTestNetwork(name('net'), LABEL, 150)
  network = net.name
  certDir = mkdtempSync(join(tmpdir(), 'gwsit-cert-'))
  const sh = (...args: string[]) => execFileSync('openssl', args, {cwd: certDir, stdio: 'ignore'})
  sh('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2', '-subj', '/CN=gwsit test CA/O=gwsit', '-keyout', 'ca.key', '-out', 'ca.pem')
  sh('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', '/CN=gwsit', '-keyout', 'key.pem', '-out', 'site.csr')
  writeFileSync(join(certDir, 'ext.cnf'), `subjectAltName=DNS:${site},DNS:${open}`)
  sh('x509', '-req', '-in', 'site.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'ext.cnf', '-out', 'cert.pem')
  const [cert, key] = ['cert.pem', 'key.pem'].map((f) => readFileSync(join(certDir, f), 'utf8'))
  caPem = readFileSync(join(certDir, 'ca.pem'), 'utf8')
  const common = {label: LABEL, network, cert, key, program: SITE}
  await startTestSite({...common, container: site, role: 'site', ip: `${net.prefix}.200`})
  await startTestSite({...common, container: open, role: 'open', ip: `${net.prefix}.201`})
  // The workspace image trusts the test CA (the gateway verifies the site against it, as it would a public one).
  ws = await makeWorkspace('gws')
  workspaces.push(ws)
  await initWorkspace(ws)
  const dockerfile = join(ws, '.agent-sandbox', 'Dockerfile')
  writeFileSync(dockerfile, `${readFileSync(dockerfile, 'utf8')}\nRUN printf '%b' '${caPem.trim().replace(/\n/g, '\\n')}\\n' > /usr/local/share/ca-certificates/gwsit.crt && update-ca-certificates\n`)
  await configure({})
  must(await cli(['build', ws]), 'build')
  must(await cli(['start', ws], {env: {GWSIT_TOKEN: TOKEN}}), 'start')
})

/** The workspace's config (a masked secret declared for the site), with `extra`, approved. */
async function configure(extra: Record<string, unknown>): Promise<void> {
  const config = {dockerNetwork: network, allowDomains: [site, open], secretEnv: [{name: 'GWSIT_TOKEN', hosts: [site]}], env: {AGENT_SANDBOX_GITHUB_META: '0'}, ...extra}
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify(config, null, 2)}\n`)
  await trustWorkspace(ws)
}

const raw = async () => must(await docker('exec', site, 'cat', '/tmp/raw'), 'site raw bytes').stdout
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))
const firewallLog = async (): Promise<Array<{path: string; host: string; status: number; decision: string; rule: string}>> =>
  must(await cli(['firewall', 'log', ws, '--json', '--lines', '2000']), 'firewall log').stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l))

type Mode = 'plain' | 'tls'
interface Case {
  name: string
  parts: (m: string) => string[]
  statuses: number[]
  /** A text the refusal's log line carries. */
  rule?: string
  /** The last answer is the site's own (no gateway refusal in it). */
  fromSite?: boolean
}

const H = `Host: ${site}\r\n`
const ws101 = (path: string) => `GET ${path} HTTP/1.1\r\n${H}Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\n\r\n`
const CASES: Case[] = [
  {name: 'CL.TE', parts: (m) => [`POST / HTTP/1.1\r\n${H}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`], statuses: [400], rule: 'HPE_'},
  {name: 'TE.CL', parts: (m) => [`POST / HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nGET ${m}\r\n0\r\n\r\n`], statuses: [400], rule: 'HPE_'},
  {name: 'Transfer-Encoding with a space before the colon', parts: (m) => [`POST / HTTP/1.1\r\n${H}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`], statuses: [400]},
  {name: 'Transfer-Encoding xchunked', parts: (m) => [`POST / HTTP/1.1\r\n${H}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`], statuses: [400], rule: 'Transfer-Encoding'},
  {name: 'two Transfer-Encoding headers', parts: (m) => [`POST / HTTP/1.1\r\n${H}Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`], statuses: [400], rule: 'Transfer-Encoding'},
  {name: 'two Content-Length headers', parts: (m) => [`POST / HTTP/1.1\r\n${H}Content-Length: 0\r\nContent-Length: 40\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`], statuses: [400]},
  {name: 'two Host headers', parts: (m) => [`GET ${m} HTTP/1.1\r\n${H}Host: ${EVIL}\r\n\r\n`], statuses: [400], rule: 'more than one Host'},
  {name: 'an absolute form naming another host', parts: (m) => [`GET http://${EVIL}${m} HTTP/1.1\r\n${H}\r\n`], statuses: [400], rule: `request target host ${EVIL}`},
  {name: 'obs-fold', parts: (m) => [`GET ${m} HTTP/1.1\r\n${H}X-A: a\r\n b\r\n\r\n`], statuses: [400]},
  {name: 'bare LF', parts: (m) => [`GET ${m} HTTP/1.1\n${H}\n`], statuses: [400]},
  {name: 'NUL in the head', parts: (m) => [`GET ${m} HTTP/1.1\r\n${H}X-A: a\0b\r\n\r\n`], statuses: [400]},
  {name: 'an oversized head', parts: (m) => [`GET ${m} HTTP/1.1\r\n${H}X-Big: @BIG@\r\n\r\n`], statuses: [431]},
  {name: 'thousands of header fields', parts: (m) => [`GET ${m} HTTP/1.1\r\n${H}@MANY@\r\n`], statuses: [431]},
  {name: 'HTTP/1.0 without Host', parts: (m) => [`GET ${m} HTTP/1.0\r\n\r\n`], statuses: [400], rule: 'no valid Host'},
  {name: 'CONNECT', parts: (m) => [`CONNECT ${EVIL}:443 HTTP/1.1\r\nHost: ${EVIL}:443\r\n\r\nGET ${m} HTTP/1.1\r\n${H}\r\n`], statuses: [400], rule: 'CONNECT'},
  {name: 'a body on an upgrade request', parts: (m) => [`GET /ws HTTP/1.1\r\n${H}Connection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: ${m.length + 4}\r\n\r\nGET ${m}`], statuses: [400], rule: 'a body on an upgrade'},
  {name: 'a pipelined request off the allowlist', parts: (m) => [`GET /first HTTP/1.1\r\n${H}\r\nGET ${m} HTTP/1.1\r\nHost: ${EVIL}\r\nConnection: close\r\n\r\n`], statuses: [200, 403], rule: 'not allowlisted'},
  {name: 'an Upgrade answered 200, then a request off the allowlist', parts: (m) => [ws101('/nows'), `GET ${m} HTTP/1.1\r\nHost: ${EVIL}\r\nConnection: close\r\n\r\n`], statuses: [200, 403], rule: 'not allowlisted'},
  {name: 'an Upgrade answered 400 (chunked), then a request off the allowlist', parts: (m) => [ws101('/nows-chunked'), `GET ${m} HTTP/1.1\r\nHost: ${EVIL}\r\nConnection: close\r\n\r\n`], statuses: [400, 403], rule: 'not allowlisted'},
  {name: 'an Upgrade answered 403 with close, then a request', parts: (m) => [ws101('/nows-close'), `GET ${m} HTTP/1.1\r\n${H}\r\n`], statuses: [403], fromSite: true},
]
/** The pipelined host switch: 400 on plain HTTP (one host per connection), 421 inside TLS (the Host must be the SNI). */
const SWITCH = (m: string) => [`GET /first HTTP/1.1\r\n${H}\r\nGET ${m} HTTP/1.1\r\nHost: ${open}\r\nConnection: close\r\n\r\n`]

describe.each(['plain', 'tls'] as Mode[])('smuggling over %s, from inside the sandbox', (mode) => {
  const markers = CASES.map((c) => `/smuggled-${c.name.replace(/[^a-z0-9]+/gi, '-')}-${mode}-${randomBytes(3).toString('hex')}`)
  const switchMarker = `/smuggled-switch-${mode}-${randomBytes(3).toString('hex')}`
  const twin = (path: string) => `GET ${path} HTTP/1.1\r\n${H}\r\nGET ${path}-again HTTP/1.1\r\n${H}Connection: close\r\n\r\n`
  const upload = `POST /upload HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n${['a'.repeat(1000), 'b'.repeat(70_000), 'c'].map((c) => `${c.length.toString(16)}\r\n${c}\r\n`).join('')}0\r\n\r\n`
  const early = `${ws101('/ws')}early`
  let out: string[] = []
  let bytes = ''

  beforeAll(async () => {
    const cases = [...CASES.map((c, i) => ({mode, host: site, parts: c.parts(markers[i])})), {mode, host: site, parts: SWITCH(switchMarker)}]
    const twins = [twin(`/twin-${mode}`), upload, early].map((p) => ({mode, host: site, parts: [p], until: p === early ? 'echo:early' : undefined}))
    const r = must(await sbx(ws, 'node', '-e', CLIENT, JSON.stringify([...cases, ...twins])), 'raw client')
    out = r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as string)
    bytes = await raw()
  })

  it.each(CASES.map((c, i) => [c.name, i] as const))('%s: refused, never reaches the site, logged', async (_name, i) => {
    const c = CASES[i]
    expect(statuses(out[i]), out[i].slice(0, 300)).toEqual(c.statuses)
    if (!c.fromSite) expect(out[i]).toContain('x-agent-sandbox: blocked')
    expect(out[i]).not.toContain('[open]')
    expect(bytes).not.toContain(markers[i])
    const refusal = c.statuses.at(-1) as number
    if (c.rule) expect((await firewallLog()).some((e) => e.decision === 'blocked' && e.status === refusal && e.rule.includes(c.rule as string))).toBe(true)
  })

  it('a pipelined request that switches host is refused and never reaches the site', () => {
    const text = out[CASES.length]
    expect(statuses(text)).toEqual([200, mode === 'plain' ? 400 : 421])
    expect(bytes).not.toContain(switchMarker)
  })

  it('the twins work: keep-alive reuse to the same host, a chunked upload, a WebSocket whose first frame went before the 101', () => {
    const [reuse, up, socket] = out.slice(CASES.length + 1)
    expect(statuses(reuse)).toEqual([200, 200])
    expect(bytes).toContain(`GET /twin-${mode}-again HTTP/1.1`)
    expect(up).toContain('got 71001')
    expect(statuses(socket)).toEqual([101])
    expect(socket).toContain('echo:early')
  })
})

describe('the twins with real clients', () => {
  it('a real WebSocket (node\'s own client) over intercepted TLS and plain HTTP', async () => {
    const WS = `const w = new WebSocket(process.argv[1]); w.onopen = () => w.send('ping'); w.onmessage = (m) => { console.log(String(m.data)); process.exit(0) }; w.onerror = (e) => { console.log('error'); console.error(String(e.error?.cause ?? e.error ?? e.message)); process.exit(1) };`
    for (const url of [`wss://${site}/ws`, `ws://${site}/ws`]) {
      const r = await sbx(ws, 'node', '--experimental-websocket', '--no-warnings', '-e', WS, url)
      expect(r.stdout.trim(), `${url}: ${r.stderr}`).toBe('echo:ping')
    }
  })

  it('curl with keep-alive and a chunked upload over intercepted TLS', async () => {
    const r = await sbx(ws, 'bash', '-c', `head -c 300000 /dev/zero | curl -sS --http1.1 --max-time 30 -H 'Transfer-Encoding: chunked' --data-binary @- https://${site}/upload && echo && curl -sS --max-time 30 https://${site}/a https://${site}/b`)
    expect(r.stdout, r.stderr).toBe(`got 300000\nGET /a host=${site} upgrade=GET /b host=${site} upgrade=`)
  })
})

describe('interception only where it buys something', () => {
  /** curl trusting only the test CA: a client with its own pinned store (a JVM, certifi). */
  const pinned = (host: string) => sbx(ws, 'bash', '-c', 'printf "%s" "$0" > /tmp/gwsit-ca.pem && exec curl -sS --max-time 20 --cacert /tmp/gwsit-ca.pem "$1"', caPem, `https://${host}/pinned`)

  it('by default a pinned-trust client works against an allowlisted host with neither rules nor secrets, and fails against the host a secret is declared for', async () => {
    const ok = await pinned(open)
    expect(ok.stdout, ok.stderr).toBe(`GET /pinned host=${open} upgrade=`)
    const intercepted = await pinned(site)
    expect(intercepted.exitCode).not.toBe(0)
    expect(intercepted.stderr).toMatch(/certificate/i)
  })

  it('with gateway.inspectAll the same client fails against that host too (its surrogate refused there)', async () => {
    await configure({gateway: {inspectAll: true}})
    must(await cli(['stop', ws]), 'stop')
    must(await cli(['start', ws], {env: {GWSIT_TOKEN: TOKEN}}), 'start with inspectAll')
    const r = await pinned(open)
    expect(r.exitCode, r.stdout).not.toBe(0)
    expect(r.stderr).toMatch(/certificate/i)
    const leak = await sbx(ws, 'bash', '-c', `curl -sS --max-time 20 -w ' %{http_code}' -H "Authorization: Bearer $GWSIT_TOKEN" https://${open}/leak`)
    expect(leak.stdout).toBe(`agent-sandbox gateway: GET ${open}/leak refused: secret GWSIT_TOKEN is not for ${open} (declared for ${site})\n 403`)
  })
})
