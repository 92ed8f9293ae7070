/**
 * `claude`, `codex` and `port` on the real engine, and the image kept up to
 * date: the agents run through the new commands (their own --version, and a
 * non-interactive prompt against a stand-in API server the test runs inside
 * the sandbox, on its loopback: no vendor is ever reached), in bind and branch
 * mode; a port forwarded from the host carries concurrent connections; an
 * edited Dockerfile is built before start, an untrusted one refused.
 */
import {spawn, type ChildProcess} from 'node:child_process'
import {connect} from 'node:net'
import {readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BIN, cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, sbx, TEST_ROOT, TEST_STATE_HOME, trustWorkspace} from './helpers.js'

const created: string[] = []
const children: ChildProcess[] = []

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL')
  for (const path of created) await cleanupUnder(join(path, '..'))
  for (const path of created) removeWorkspace(path)
})

/** A workspace with the agents pointed at the stand-in (ANTHROPIC_BASE_URL), approved as its user would. */
async function agentWorkspace(role: string): Promise<string> {
  const path = await makeWorkspace(role)
  created.push(path)
  await initWorkspace(path)
  const env = {AGENT_SANDBOX_GITHUB_META: '0', ANTHROPIC_BASE_URL: 'http://127.0.0.1:8787', ANTHROPIC_API_KEY: 'sk-ant-stand-in', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1'}
  writeFileSync(join(path, '.agent-sandbox', 'config.json'), `${JSON.stringify({env, sharedAgentConfig: false}, null, 2)}\n`)
  await trustWorkspace(path)
  return path
}

/**
 * The stand-in, run inside the sandbox as its user: the Anthropic Messages API
 * on 127.0.0.1:8787 (a streamed or a plain answer, every request logged), and
 * a line echo server on 8788 that prefixes each line with its connection's number.
 */
const STAND_IN = `const http = require('http'), net = require('net'), fs = require('fs');
const TEXT = 'hello from the stand-in';
http.createServer((q, r) => {
  let body = ''; q.on('data', (c) => (body += c)); q.on('end', () => {
    fs.appendFileSync('/tmp/stand-in.log', q.method + ' ' + q.url + '\\n');
    let req = {}; try { req = JSON.parse(body) } catch {}
    if (q.method === 'POST' && q.url.startsWith('/v1/messages/count_tokens')) { r.writeHead(200, {'content-type': 'application/json'}); return r.end('{"input_tokens":1}') }
    if (q.method !== 'POST' || !q.url.startsWith('/v1/messages')) { r.writeHead(404, {'content-type': 'application/json'}); return r.end('{"type":"error","error":{"type":"not_found_error","message":"stand-in"}}') }
    const model = req.model || 'stand-in', usage = {input_tokens: 1, output_tokens: 5};
    if (!req.stream) { r.writeHead(200, {'content-type': 'application/json'}); return r.end(JSON.stringify({id: 'msg_1', type: 'message', role: 'assistant', model, content: [{type: 'text', text: TEXT}], stop_reason: 'end_turn', stop_sequence: null, usage})) }
    r.writeHead(200, {'content-type': 'text/event-stream'});
    const ev = (type, data) => r.write('event: ' + type + '\\ndata: ' + JSON.stringify({type, ...data}) + '\\n\\n');
    ev('message_start', {message: {id: 'msg_1', type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage}});
    ev('content_block_start', {index: 0, content_block: {type: 'text', text: ''}});
    ev('content_block_delta', {index: 0, delta: {type: 'text_delta', text: TEXT}});
    ev('content_block_stop', {index: 0});
    ev('message_delta', {delta: {stop_reason: 'end_turn', stop_sequence: null}, usage: {output_tokens: 5}});
    ev('message_stop', {});
    r.end();
  });
}).listen(8787, '127.0.0.1');
let n = 0;
net.createServer((s) => { const id = ++n; let buf = ''; s.on('data', (d) => { buf += d; let i; while ((i = buf.indexOf('\\n')) >= 0) { s.write(id + ':' + buf.slice(0, i) + '\\n'); buf = buf.slice(i + 1) } }); s.on('end', () => s.end('bye ' + id + '\\n')) }).listen(8788, '127.0.0.1');`

async function startStandIn(container: string): Promise<void> {
  const r = await docker('exec', '-d', '-u', 'node', container, 'node', '-e', STAND_IN)
  expect(r.exitCode, r.stderr).toBe(0)
  for (let i = 0; i < 200; i++) {
    const probe = await docker('exec', container, 'bash', '-c', ': < /dev/tcp/127.0.0.1/8787 && : < /dev/tcp/127.0.0.1/8788')
    if (probe.exitCode === 0) return
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error('the stand-in does not listen')
}

async function sandboxName(ws: string, extra: string[] = []): Promise<string> {
  const r = await cli(['start', ws, '--json', ...extra])
  expect(r.exitCode, r.stderr).toBe(0)
  return JSON.parse(r.stdout).name as string
}

describe('claude and codex', () => {
  let ws: string

  beforeAll(async () => {
    ws = await agentWorkspace('agents')
  })

  it('start the sandbox (building its image) and run the agent\'s own --version, from the workspace or with --workspace', async () => {
    const claude = await cli(['claude', '--version'], {cwd: ws})
    expect(claude.exitCode, claude.stderr).toBe(0)
    expect(claude.stdout).toMatch(/^\d+\.\d+\.\d+ \(Claude Code\)$/m)
    const codex = await cli(['codex', '--workspace', ws, '--version'])
    expect(codex.exitCode, codex.stderr).toBe(0)
    expect(codex.stdout).toMatch(/^codex-cli \d+\.\d+\.\d+/m)
  })

  it('pass flags after their own on to the agent (-- too), which judges them', async () => {
    const r = await cli(['claude', '--workspace', ws, '--', '-p', 'x', '--no-such-option'])
    expect(r.exitCode).not.toBe(0)
    expect(r.stderr).toMatch(/unknown option '--no-such-option'/)
  })

  it('pass the agent\'s exit code and error output through', async () => {
    const r = await cli(['codex', '--workspace', ws, 'no-such-subcommand-or-prompt', '--no-such-flag'])
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toMatch(/--no-such-flag/)
  })

  it('claude -p answers from the stand-in, its output streamed to stdout', async () => {
    const name = await sandboxName(ws)
    await startStandIn(name)
    const r = await cli(['claude', '--workspace', ws, '-p', 'say hello'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim()).toBe('hello from the stand-in')
    const log = await docker('exec', name, 'cat', '/tmp/stand-in.log')
    expect(log.stdout).toMatch(/^POST \/v1\/messages/m)
  })

  it('work with --branch: the agent runs in the branch sandbox', async () => {
    const r = await cli(['claude', '--workspace', ws, '--branch', 'feat-agents', '--version'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/\(Claude Code\)/)
    const name = await sandboxName(ws, ['--branch', 'feat-agents'])
    expect(name).toContain('feat-agents')
    const pwd = await cli(['exec', ws, '--branch', 'feat-agents', '--', 'git', 'branch', '--show-current'])
    expect(pwd.stdout.trim()).toBe('feat-agents')
  })

  it('refuse a bad flag value of their own in one line', async () => {
    const r = await cli(['claude', '--workspace', join(TEST_ROOT, 'no-such-dir'), '--version'])
    expect(r.exitCode).toBe(2)
    expect(r.stderr.trim().split('\n')[0]).toMatch(/workspace path does not exist/)
    const net = await cli(['codex', '--network', 'lan', '--version'])
    expect(net.exitCode).toBe(2)
  })
})

/** Start `agent-sandbox port …` and wait for its "Forwarding from" lines. */
async function forward(args: string[], count: number): Promise<{child: ChildProcess; ports: number[]; exited: Promise<number | null>}> {
  const child = spawn(BIN, ['port', ...args], {env: {...process.env, XDG_STATE_HOME: TEST_STATE_HOME}, stdio: ['ignore', 'pipe', 'pipe']})
  children.push(child)
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  let out = ''
  let err = ''
  child.stderr?.on('data', (d) => (err += d))
  const ports = await new Promise<number[]>((resolve, reject) => {
    child.stdout?.on('data', (d) => {
      out += d
      const found = [...out.matchAll(/^Forwarding from 127\.0\.0\.1:(\d+) -> \d+$/gm)].map((m) => Number(m[1]))
      if (found.length === count) resolve(found)
    })
    void exited.then((code) => reject(new Error(`port exited (${code}): ${err}`)))
  })
  return {child, ports, exited}
}

/** A connection that reads what comes back line by line. */
function lineClient(port: number) {
  const socket = connect(port, '127.0.0.1')
  let buffer = ''
  const waiting: Array<() => void> = []
  socket.on('data', (d) => {
    buffer += d
    for (const w of waiting.splice(0)) w()
  })
  const next = async (): Promise<string> => {
    for (let i = 0; i < 300 && !buffer.includes('\n'); i++) await new Promise<void>((resolve) => (waiting.push(resolve), setTimeout(resolve, 100)))
    const at = buffer.indexOf('\n')
    if (at < 0) throw new Error(`no line (have ${JSON.stringify(buffer)})`)
    const line = buffer.slice(0, at)
    buffer = buffer.slice(at + 1)
    return line
  }
  return {socket, next, send: (text: string) => socket.write(`${text}\n`)}
}

describe('port', () => {
  let ws: string
  let name: string

  beforeAll(async () => {
    ws = await agentWorkspace('ports')
    name = await sandboxName(ws, ['--build'])
    await startStandIn(name)
  })

  it('carries two concurrent connections, and an HTTP request on a second port, and ends on Ctrl-C with 0', async () => {
    // The rules without comments and packet counters.
    const rules = async () => (await docker('exec', '-u', 'root', name, 'iptables-save')).stdout.replace(/^#.*$/gm, '').replace(/\[\d+:\d+\]/g, '')
    const rulesBefore = await rules()
    expect(rulesBefore).toMatch(/^-A OUTPUT /m)
    const {child, ports, exited} = await forward([ws, '0:8788', '0:8787'], 2)
    const a = lineClient(ports[0])
    const b = lineClient(ports[0])
    a.send('one')
    b.send('two')
    const [fromA, fromB] = [await a.next(), await b.next()]
    // Two connections inside, both open at once.
    expect(new Set([fromA.split(':')[0], fromB.split(':')[0]]).size).toBe(2)
    expect(fromA).toMatch(/:one$/)
    expect(fromB).toMatch(/:two$/)
    a.send('again')
    expect(await a.next()).toBe(`${fromA.split(':')[0]}:again`)
    // End of input reaches the server, and its answer after it comes back.
    b.socket.end()
    expect(await b.next()).toBe(`bye ${fromB.split(':')[0]}`)
    a.socket.destroy()
    const res = await fetch(`http://127.0.0.1:${ports[1]}/v1/messages`, {method: 'POST', body: '{}'})
    expect(await res.json()).toMatchObject({content: [{text: 'hello from the stand-in'}]})
    // The sandbox's firewall is as it was.
    expect(await rules()).toBe(rulesBefore)
    child.kill('SIGINT')
    expect(await exited).toBe(0)
  })

  it('refuses a bad port, no port, a port in use and a stopped sandbox, in one line each', async () => {
    for (const args of [[ws, '70000'], [ws, 'abc:80'], [ws]]) {
      const r = await cli(['port', ...args])
      expect(r.exitCode, args.join(' ')).toBe(2)
      expect(r.stderr.trim().split('\n')[0]).toMatch(/not a port to forward|no port given|workspace path does not exist/)
    }
    const held = await forward([ws, '0:8788'], 1)
    const busy = await cli(['port', ws, `${held.ports[0]}:8788`])
    expect(busy.exitCode).toBe(2)
    expect(busy.stderr).toMatch(/127\.0\.0\.1:\d+: the port is in use/)
    held.child.kill('SIGINT')
    await held.exited
    const other = await agentWorkspace('not-started')
    const stopped = await cli(['port', other, '3000'])
    expect(stopped.exitCode).toBe(6)
    expect(stopped.stderr).toMatch(/is not running/)
    expect(stopped.stderr).toMatch(/agent-sandbox start /)
  })
})

describe('a stale image', () => {
  let ws: string

  beforeAll(async () => {
    ws = await agentWorkspace('stale')
  })

  const imageId = async (path: string) => {
    const list = await docker('images', '--filter', `label=dev.agent-sandbox.workspace=${path}`, '--format', '{{.ID}}')
    return list.stdout.trim()
  }
  const addLine = (path: string, line: string) => {
    const file = join(path, '.agent-sandbox', 'Dockerfile')
    writeFileSync(file, `${readFileSync(file, 'utf8')}\n${line}\n`)
  }

  it('is rebuilt by start after a Dockerfile edit, and the sandbox recreated on it', async () => {
    const name = await sandboxName(ws, ['--build'])
    const before = await imageId(ws)
    expect(before).not.toBe('')
    expect((await cli(['stop', ws])).exitCode).toBe(0)
    addLine(ws, 'RUN echo first-edit > /etc/agent-sandbox-test-marker')
    await trustWorkspace(ws)
    const r = await cli(['start', ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stderr).toMatch(/out of date .*rebuilding it/)
    expect(await imageId(ws)).not.toBe(before)
    expect((await sbx(ws, 'cat', '/etc/agent-sandbox-test-marker')).stdout.trim()).toBe('first-edit')
    // Nothing changed since: no build.
    const again = await cli(['start', ws])
    expect(again.stderr).not.toMatch(/rebuilding/)
    expect(again.stdout).toContain(`${name} already running`)
  })

  it('names a running sandbox on an older image in one line, with the commands that recreate it', async () => {
    addLine(ws, 'RUN echo second-edit > /etc/agent-sandbox-test-marker')
    await trustWorkspace(ws)
    const r = await cli(['shell', ws], {input: 'exit 0\n'})
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stderr).toMatch(/rebuilding it/)
    const notice = r.stderr.split('\n').filter((l) => l.includes('runs an older image'))
    expect(notice).toHaveLength(1)
    expect(notice[0]).toContain(`agent-sandbox stop ${ws} && agent-sandbox start ${ws}`)
    expect((await sbx(ws, 'cat', '/etc/agent-sandbox-test-marker')).stdout.trim()).toBe('first-edit')
    expect((await cli(['stop', ws])).exitCode).toBe(0)
    expect((await cli(['start', ws])).exitCode).toBe(0)
    expect((await sbx(ws, 'cat', '/etc/agent-sandbox-test-marker')).stdout.trim()).toBe('second-edit')
  })

  it('is not rebuilt from an untrusted Dockerfile: one line naming it, nothing built, no container', async () => {
    const path = await agentWorkspace('untrusted')
    expect((await cli(['build', path])).exitCode).toBe(0)
    const before = await imageId(path)
    addLine(path, 'RUN echo unapproved')
    const r = await cli(['start', path])
    expect(r.exitCode).toBe(2)
    const lines = r.stderr.trim().split('\n')
    expect(lines[0]).toContain(`${join(path, '.agent-sandbox', 'Dockerfile')} changed since you trusted it`)
    expect(lines.filter((l) => !/^\s*(hint|→|agent-sandbox trust)/i.test(l)).length).toBeLessThanOrEqual(2)
    expect(await imageId(path)).toBe(before)
    const containers = await docker('ps', '-aq', '--filter', `label=dev.agent-sandbox.workspace=${path}`)
    expect(containers.stdout.trim()).toBe('')
  })
})
