/**
 * `watch` on the real engine, in a real terminal (tmux), against test sites
 * this file starts on a network it creates: the agent's refused request shows
 * on screen, highlighted, and waits as a pending approval; the allow key
 * makes the agent's retry succeed; the screen is drawn again at a new size;
 * NO_COLOR leaves no colour in the pane; without a terminal, `watch --json`
 * streams the same events as JSON lines.
 */
import {randomBytes} from 'node:crypto'
import {execFileSync} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {execa} from 'execa'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {BIN, cli, sbx, TEST_STATE_HOME} from './helpers.js'
import {createTestNetwork, must, removeTestSites, siteCertificate, startedWorkspace, startTestSite} from './test-sites.js'

const RUN = `${(process.env.AGENT_SANDBOX_IT_ID ?? 'main').toLowerCase().replace(/[^a-z0-9]+/g, '-')}-${randomBytes(3).toString('hex')}`
const LABEL = `dev.agent-sandbox.watchit=${RUN}`
const name = (role: string) => `watchit-${role}-${RUN}`
/** A tmux server of this file's own; its socket file is removed after. */
const SOCKET = `watchit-${RUN}`
const TMUX = ['-L', SOCKET, '-f', '/dev/null']

const SITE = `const http = require('http'), https = require('https');
const answer = (q, r) => r.end('hi from ' + process.env.NAME + ' host=' + q.headers.host);
http.createServer(answer).listen(80, '::');
https.createServer({cert: process.env.CERT, key: process.env.KEY}, answer).listen(443, '::');`

const workspaces: string[] = []
let network = ''
let certDir = ''
/** A notify-send stand-in, first on every session's PATH: it logs each notification to NOTIFIED. */
let stubDir = ''
const notified = () => (existsSync(join(stubDir, 'notified')) ? readFileSync(join(stubDir, 'notified'), 'utf8') : '')

const tmux = (...args: string[]) => execFileSync('tmux', [...TMUX, ...args], {encoding: 'utf8'})
const screen = (session: string, escapes = false) => tmux('capture-pane', '-p', ...(escapes ? ['-e'] : []), '-t', session)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Poll the pane until `test` holds; fails with the last screen after `deadlineMs`. Resolves to the ms it took. */
async function waitForScreen(session: string, test: (text: string) => boolean, what: string, deadlineMs = 15_000): Promise<number> {
  const started = Date.now()
  let text = ''
  while (Date.now() - started < deadlineMs) {
    text = screen(session)
    if (test(text)) return Date.now() - started
    await sleep(25)
  }
  throw new Error(`${what}: not on screen after ${deadlineMs} ms; the screen:\n${text}`)
}

/** Select the entry whose line has `text` (other sandboxes on the engine may have pending approvals too). */
async function select(session: string, text: string): Promise<void> {
  const selected = () => screen(session).split('\n').find((l) => l.startsWith('> ')) ?? ''
  for (let i = 0; i < 50 && !selected().includes(text); i++) {
    tmux('send-keys', '-t', session, 'j')
    await sleep(50)
  }
  expect(selected()).toContain(text)
}

/** Start `watch` in a detached tmux session of 160 × 40. */
function startWatch(session: string, env: Record<string, string>): void {
  const vars = Object.entries({XDG_STATE_HOME: TEST_STATE_HOME, TERM: 'xterm-256color', PATH: `${stubDir}:${process.env.PATH ?? ''}`, ...env}).map(([k, v]) => `${k}=${v}`)
  // The pane stays after watch exits, so that a failure's last words can be read.
  tmux('new-session', '-d', '-x', '160', '-y', '40', '-s', session, 'env', ...vars, BIN, 'watch', '--interval', '1', ';', 'set-option', '-t', session, 'remain-on-exit', 'on')
}

afterAll(async () => {
  try {
    tmux('kill-server')
  } catch {
    // no server: no session was started
  }
  rmSync(join(process.env.TMUX_TMPDIR || '/tmp', `tmux-${process.getuid?.() ?? 0}`, SOCKET), {force: true})
  await removeTestSites(LABEL, network, workspaces, certDir)
  if (stubDir) rmSync(stubDir, {recursive: true, force: true})
})

describe('watch', () => {
  const allowed = name('allowed')
  const asked = name('asked')
  const streamed = name('streamed')
  let ip = ''
  let ws = ''
  let container = ''

  beforeAll(async () => {
    const net = await createTestNetwork(name('net'), LABEL, 150)
    network = net.name
    ip = `${net.prefix}.200`
    stubDir = mkdtempSync(join(tmpdir(), 'watchit-notify-'))
    writeFileSync(join(stubDir, 'notify-send'), `#!/bin/sh\nprintf '%s|' "$@" >> ${join(stubDir, 'notified')}\necho >> ${join(stubDir, 'notified')}\n`)
    chmodSync(join(stubDir, 'notify-send'), 0o755)
    const site = siteCertificate('watchit', [allowed, asked])
    certDir = site.dir
    const {cert, key} = site
    await startTestSite({container: allowed, label: LABEL, network, role: 'site', ip, cert, key, program: SITE})
    await startTestSite({container: asked, label: LABEL, network, role: 'asked', ip: `${net.prefix}.201`, cert, key, program: SITE})
    ;({ws, container} = await startedWorkspace('watch', workspaces, {dockerNetwork: network, allowDomains: [allowed]}))
    expect(container).toMatch(/^agent-sandbox-/)
    // Its address is now the firewall's to let through: a request for another name reaches the gateway, which refuses it.
    expect((await sbx(ws, 'curl', '-sS', '--max-time', '10', `http://${allowed}/`)).stdout).toBe(`hi from site host=${allowed}`)
  })

  it('shows a refused request and its pending approval; the allow key makes the retry succeed; a resize redraws; NO_COLOR has no colour', async () => {
    startWatch('colour', {})
    await waitForScreen('colour', (text) => text.includes(container), 'the sandbox')

    const refused = await sbx(ws, 'curl', '-sS', '--max-time', '10', '-w', '%{http_code}', '--resolve', `${asked}:80:${ip}`, `http://${asked}/x`)
    expect(refused.stdout.split('\n').at(-1), refused.stderr).toBe('403')
    const onScreen = await waitForScreen('colour', (text) => text.split('\n').some((l) => l.includes('BLOCKED') && l.includes(`GET ${asked}/x`)), 'the refused request')
    const pendingShown = await waitForScreen('colour', (text) => text.includes(`${container}  ${asked}  (host, 1×)`), 'the pending approval')
    console.log(`watch: the refused request on screen ${onScreen} ms after curl returned; its pending approval after ${onScreen + pendingShown} ms`)

    // The control for NO_COLOR below: with colours, the refused request's line is coloured.
    const coloured = screen('colour', true)
    const blockedLine = coloured.split('\n').find((l) => l.includes(`GET ${asked}/x`)) ?? ''
    expect(blockedLine).toMatch(/\x1b\[[0-9;]*m/)

    await select('colour', `${container}  ${asked}`)
    tmux('send-keys', '-t', 'colour', 'a')
    await waitForScreen('colour', (text) => text.includes(`${container}: allowed ${asked} for the sandbox's life`), 'the allow outcome')
    const retry = await sbx(ws, 'curl', '-sS', '--max-time', '10', `http://${asked}/x`)
    expect(retry.stdout, retry.stderr).toBe(`hi from asked host=${asked}`)
    await waitForScreen('colour', (text) => !text.includes(`${container}  ${asked}  (host`), 'the approval leaving the queue')

    const lines = (text: string) => text.replace(/\n$/, '').split('\n')
    expect(lines(screen('colour'))).toHaveLength(40)
    expect(lines(screen('colour'))[39]).toMatch(/^o allow once/)
    tmux('resize-window', '-t', 'colour', '-x', '100', '-y', '25')
    await waitForScreen('colour', (text) => lines(text).length === 25 && /^o allow once/.test(lines(text)[24]), 'the frame at 100 × 25')
    expect(Math.max(...lines(screen('colour')).map((l) => [...l].length))).toBeLessThanOrEqual(100)

    startWatch('plain', {NO_COLOR: '1'})
    await waitForScreen('plain', (text) => text.includes(`GET ${asked}/x`) && text.includes(container), 'the requests, without colour')
    const plain = screen('plain', true)
    expect(plain).toContain('BLOCKED')
    expect(plain).not.toMatch(/\x1b\[[0-9;]*m/)

    for (const session of ['colour', 'plain']) {
      tmux('send-keys', '-t', session, 'q')
      await waitForScreen(session, (text) => !text.includes('o allow once'), `${session}: the screen given back after q`)
    }
  })

  it('streams the same events as JSON lines without a terminal, the refused request and its pending approval among them', async () => {
    const child = execa(BIN, ['watch', '--interval', '1'], {env: {XDG_STATE_HOME: TEST_STATE_HOME}, stdin: 'ignore', reject: false, buffer: true})
    const events: Array<Record<string, any>> = []
    let rest = ''
    child.stdout?.on('data', (chunk: Buffer) => {
      const text = rest + chunk.toString('utf8')
      rest = text.slice(text.lastIndexOf('\n') + 1)
      for (const line of text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter(Boolean)) events.push(JSON.parse(line))
    })
    const seen = async (test: (e: Record<string, any>) => boolean, what: string) => {
      for (let i = 0; i < 300 && !events.some(test); i++) await sleep(50)
      expect(events.some(test), `${what} in ${JSON.stringify(events).slice(-2000)}`).toBe(true)
    }
    try {
      await seen((e) => e.type === 'sandboxes' && e.sandboxes.some((s: {name: string; running: boolean}) => s.name === container && s.running), 'the sandbox')
      const refused = await sbx(ws, 'curl', '-sS', '--max-time', '10', '-w', '%{http_code}', '--resolve', `${streamed}:80:${ip}`, `http://${streamed}/y`)
      expect(refused.stdout.split('\n').at(-1), refused.stderr).toBe('403')
      await seen((e) => e.type === 'request' && e.sandbox === container && e.entry.host === streamed && e.entry.decision === 'blocked', 'the refused request')
      await seen(
        (e) => e.type === 'pending' && e.sandbox === container && e.pending.some((p: {host: string; command: string}) => p.host === streamed && p.command === `agent-sandbox firewall allow ${streamed}`),
        'the pending approval',
      )
      expect(events.every((e) => typeof e.time === 'string' && typeof e.type === 'string')).toBe(true)
    } finally {
      child.kill('SIGTERM')
    }
    const result = await child
    expect(result.exitCode).toBe(143) // ended by a signal, as firewall log --follow is
    expect(result.stderr).toContain('one JSON object a line')
  })

  it('notifies a pending approval once with watchNotify, and denies it with d: it leaves the queue, and nothing is allowed', async () => {
    const queue = async () => JSON.parse(must(await cli(['firewall', 'pending', ws, '--json']), 'firewall pending').stdout).pending.map((p: {host: string}) => p.host)
    expect(await queue()).toContain(streamed) // left by the test before
    const config = join(stubDir, 'config')
    mkdirSync(join(config, 'agent-sandbox'), {recursive: true})
    writeFileSync(join(config, 'agent-sandbox', 'config.json'), '{"watchNotify": true}\n')
    startWatch('deny', {XDG_CONFIG_HOME: config})
    await waitForScreen('deny', (text) => text.includes(`${container}  ${streamed}  (host`), 'the pending approval')
    // watchNotify: one notification for the approval (the sessions before, without it, sent none for theirs).
    const line = `--app-name=agent-sandbox|agent-sandbox: approval pending|${container}: ${streamed}|`
    for (let i = 0; i < 100 && !notified().includes(line); i++) await sleep(50)
    // Other sandboxes on the engine may have approvals of their own: ours are counted.
    expect(notified().split('\n').filter((l) => l.includes(container))).toEqual([line])
    await select('deny', `${container}  ${streamed}`)
    tmux('send-keys', '-t', 'deny', 'd')
    await waitForScreen('deny', (text) => text.includes(`${container}: denied ${streamed}`), 'the deny outcome')
    await waitForScreen('deny', (text) => !text.includes(`${container}  ${streamed}  (host`), 'the approval leaving the queue')
    expect(await queue()).not.toContain(streamed)
    const again = await sbx(ws, 'curl', '-sS', '--max-time', '10', '-o', '/dev/null', '-w', '%{http_code}', '--resolve', `${streamed}:80:${ip}`, `http://${streamed}/y`)
    expect(again.stdout).toBe('403') // denying grants nothing
    tmux('send-keys', '-t', 'deny', 'q')
  })

  it("opens the selected kept push's diff in the pager with r, and comes back when the pager ends", async () => {
    const push = await sbx(ws, 'sh', '-c', 'set -e; git config user.name Agent; git config user.email agent@example.invalid; echo watched > watched.txt; git add watched.txt; git commit -q -m watched; git push host HEAD:main')
    expect(push.stderr).toContain('kept on the host as refs/sandbox/main')
    // A pager of the test's own (no less needed): the diff, an end mark, then a key on the terminal ends it.
    startWatch('review', {GIT_PAGER: `sh -c 'cat; echo "(END)"; read key < /dev/tty'`})
    await waitForScreen('review', (text) => text.includes('PUSHES TO REVIEW (') && text.includes(`  main  `) && text.includes(`(${ws})`), 'the kept push')
    await select('review', `(${ws})`)
    tmux('send-keys', '-t', 'review', 'r')
    await waitForScreen('review', (text) => text.includes('watched.txt | 1') && text.includes('(END)') && !text.includes('o allow once'), 'the diff in the pager')
    tmux('send-keys', '-t', 'review', 'Enter') // ends the pager
    await waitForScreen('review', (text) => text.includes(`review show main (${ws}): exit 0`) && text.includes('o allow once'), 'the UI again')
    tmux('send-keys', '-t', 'review', 'q')
    await waitForScreen('review', (text) => !text.includes('o allow once'), 'the screen given back after q')
  })
})
