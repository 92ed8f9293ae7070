import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, describe, expect, it, vi} from 'vitest'
import {buildFrame, colorEnabled, formatUptime, paint, type Line} from '../../src/cli/watch-frame.js'
import {cpuPercentBetween, usageOf} from '../../src/lib/engine/stats.js'
import type {RequestLogEntry} from '../../src/lib/network/gateway/log.js'
import type {PendingApproval} from '../../src/lib/network/pending.js'
import {startGatherer} from '../../src/lib/watch/gather.js'
import {
  actionForKey,
  allowOptions,
  appliesTo,
  initialState,
  jsonLine,
  MAX_REQUESTS,
  moveSelection,
  newApprovals,
  pendingKey,
  reduce,
  selectable,
  TEN_MINUTES_MS,
  type WatchedSandbox,
  type WatchEvent,
  type WatchState,
} from '../../src/lib/watch/model.js'
import {Labels} from '../../src/lib/workspace.js'
import {containerInfo, fakeEngine} from './fake-engine.js'

const sandbox = (name: string, fields: Partial<WatchedSandbox> = {}): WatchedSandbox => ({
  name,
  repo: 'app',
  path: `/src/${name}`,
  mode: 'bind',
  branch: '',
  state: 'running',
  running: true,
  network: 'firewall',
  ...fields,
})
const approval = (host: string, fields: Partial<PendingApproval> = {}): PendingApproval => ({
  kind: 'host',
  host,
  count: 1,
  line: `agent-sandbox gateway: ${host} refused`,
  command: `agent-sandbox firewall allow ${host}`,
  ...fields,
})
const request = (host: string, decision: 'allowed' | 'blocked'): RequestLogEntry => ({
  time: '2026-11-29T10:00:01.000Z',
  method: 'GET',
  host,
  path: '/x',
  status: decision === 'blocked' ? 403 : 200,
  bytes: 2,
  decision,
  rule: decision === 'blocked' ? 'not allowlisted' : host,
})
const apply = (events: WatchEvent[], state: WatchState = initialState()) => events.reduce(reduce, state)
const text = (lines: Line[]) => lines.map((l) => paint(l, 200, false))

describe('watch: the event model', () => {
  const one = sandbox('sb-one')
  const two = sandbox('sb-two', {path: '/src/sb-one'}) // the same workspace, another branch
  const base = apply([
    {type: 'sandboxes', sandboxes: [one, two]},
    {type: 'pending', sandbox: 'sb-one', pending: [approval('a.test')]},
    {type: 'pending', sandbox: 'sb-two', pending: [approval('b.test'), approval('c.test', {kind: 'rule', method: 'POST', path: '/up'})]},
    {type: 'pushes', workspace: '/src/sb-one', pushes: [{branch: 'main', commit: 'c0ffee'}]},
  ])

  it('lists the pending approvals sandbox by sandbox, then each workspace\'s kept pushes once', () => {
    expect(base.listed).toBe(true)
    expect(selectable(base).map((i) => (i.kind === 'pending' ? `${i.sandbox.name} ${i.approval.host}` : `push ${i.push.branch}`))).toEqual([
      'sb-one a.test',
      'sb-two b.test',
      'sb-two c.test',
      'push main',
    ])
  })

  it('keeps the selection within the entries as they come and go', () => {
    const last = moveSelection(base, 10)
    expect(last.selected).toBe(3)
    expect(moveSelection(last, -1).selected).toBe(2)
    expect(moveSelection(base, -5).selected).toBe(0)
    // The selected push goes: nothing is selected, and a key acts on nothing, until the user moves.
    const none = reduce(last, {type: 'pushes', workspace: '/src/sb-one', pushes: []})
    expect(none.selected).toBe(-1)
    expect(selectable(none)[none.selected]).toBeUndefined()
    expect(reduce(none, {type: 'pending', sandbox: 'sb-one', pending: [approval('a.test')]}).selected).toBe(-1)
    expect(moveSelection(none, 1).selected).toBe(0)
    expect(moveSelection(none, -1).selected).toBe(0)
    // A sandbox that is gone takes its pending approvals with it.
    const gone = reduce(base, {type: 'sandboxes', sandboxes: [two]})
    expect(gone.pending['sb-one']).toBeUndefined()
  })

  it('keeps the selection on its entry when an entry comes before it, so that a key never acts on another one', () => {
    const onC = moveSelection(base, 2) // sb-two c.test
    const more = reduce(onC, {type: 'pending', sandbox: 'sb-one', pending: [approval('a.test'), approval('new.test')]})
    const item = selectable(more)[more.selected]
    expect(item.kind === 'pending' && `${item.sandbox.name} ${item.approval.host}`).toBe('sb-two c.test')
    expect(more.selected).toBe(3)
    // The selected entry itself goes: the push that took its place is not selected.
    const gone = reduce(onC, {type: 'pending', sandbox: 'sb-two', pending: [approval('b.test')]})
    expect(selectable(gone)[2].kind).toBe('push')
    expect(gone.selected).toBe(-1)
  })

  it('keeps the last MAX_REQUESTS requests, newest last', () => {
    let state = initialState()
    for (let i = 0; i < MAX_REQUESTS + 3; i++) state = reduce(state, {type: 'request', sandbox: 'sb-one', entry: request(`h${i}.test`, 'allowed')})
    expect(state.requests).toHaveLength(MAX_REQUESTS)
    expect(state.requests.at(-1)?.entry.host).toBe(`h${MAX_REQUESTS + 2}.test`)
    expect(state.requests[0].entry.host).toBe('h3.test')
  })

  it('shows the outcome of an action and a warning with its sandbox', () => {
    expect(reduce(base, {type: 'action', ok: true, message: 'allowed a.test'}).message).toEqual({ok: true, text: 'allowed a.test'})
    expect(reduce(base, {type: 'warning', sandbox: 'sb-one', message: 'not ready'}).message).toEqual({ok: false, text: 'sb-one: not ready'})
  })
})

describe('watch: keys', () => {
  it('maps one key to each action, and nothing else', () => {
    expect(actionForKey('o')).toEqual({kind: 'allow', scope: 'once'})
    expect(actionForKey('t')).toEqual({kind: 'allow', scope: 'ten-minutes'})
    expect(actionForKey('a')).toEqual({kind: 'allow', scope: 'life'})
    expect(actionForKey('s')).toEqual({kind: 'allow', scope: 'save'})
    expect(actionForKey('d')).toEqual({kind: 'deny'})
    expect(actionForKey('r')).toEqual({kind: 'review'})
    expect(actionForKey('ENTER')).toEqual({kind: 'review'})
    expect(actionForKey('DOWN')).toEqual({kind: 'move', by: 1})
    expect(actionForKey('k')).toEqual({kind: 'move', by: -1})
    expect(actionForKey('q')).toEqual({kind: 'quit'})
    expect(actionForKey('CTRL_C')).toEqual({kind: 'quit'})
    expect(actionForKey('x')).toBeUndefined()
    expect(actionForKey('toString')).toBeUndefined()
  })

  it('gives allowDomains the option of each scope: once, 10 minutes, none for the sandbox\'s life, save', () => {
    expect(allowOptions('once')).toEqual({once: true})
    expect(allowOptions('ten-minutes')).toEqual({forMs: 600_000})
    expect(TEN_MINUTES_MS).toBe(600_000)
    expect(allowOptions('life')).toEqual({})
    expect(allowOptions('save')).toEqual({save: true})
  })

  it('allows and denies only a pending approval, and reviews only a push', () => {
    const pending = {kind: 'pending' as const, sandbox: sandbox('s'), approval: approval('a.test')}
    const push = {kind: 'push' as const, sandbox: sandbox('s'), push: {branch: 'main', commit: 'c0ffee'}}
    expect(appliesTo({kind: 'allow', scope: 'life'}, pending)).toBe(true)
    expect(appliesTo({kind: 'allow', scope: 'life'}, push)).toBe(false)
    expect(appliesTo({kind: 'deny'}, push)).toBe(false)
    expect(appliesTo({kind: 'review'}, push)).toBe(true)
    expect(appliesTo({kind: 'review'}, pending)).toBe(false)
    expect(appliesTo({kind: 'deny'}, undefined)).toBe(false)
  })

  it('notifies each pending approval once: new hosts only, a rule by its method and path', () => {
    const seen = new Set([pendingKey('s', approval('a.test'))])
    const next = [approval('a.test', {count: 3}), approval('b.test'), approval('a.test', {kind: 'rule', method: 'POST', path: '/x'})]
    expect(newApprovals(seen, 's', next).map((p) => `${p.kind} ${p.host}`)).toEqual(['host b.test', 'rule a.test'])
    expect(newApprovals(seen, 'other', [approval('a.test')])).toHaveLength(1)
  })
})

describe('watch --json', () => {
  it('is the event itself with the time it was seen, on one line', () => {
    const event: WatchEvent = {type: 'request', sandbox: 'sb', entry: request('a.test', 'blocked')}
    const line = jsonLine(event, new Date('2026-11-29T10:00:02.000Z'))
    expect(line).not.toContain('\n')
    expect(JSON.parse(line)).toEqual({time: '2026-11-29T10:00:02.000Z', type: 'request', sandbox: 'sb', entry: request('a.test', 'blocked')})
    const pending = JSON.parse(jsonLine({type: 'pending', sandbox: 'sb', pending: [approval('a.test')]}))
    expect(pending.pending[0]).toMatchObject({kind: 'host', host: 'a.test', command: 'agent-sandbox firewall allow a.test'})
  })
})

describe('watch: the screen', () => {
  const now = Date.parse('2026-11-29T10:05:00.000Z')
  const state = apply([
    {type: 'sandboxes', sandboxes: [sandbox('sb-one', {startedAt: '2026-11-29T08:00:00.000Z', cpuPercent: 12.34, memoryBytes: 50 * 1024 * 1024}), sandbox('sb-off', {running: false, state: 'exited'})]},
    {type: 'pending', sandbox: 'sb-one', pending: [approval('a.test'), approval('b.test')]},
    ...Array.from({length: 30}, (_, i): WatchEvent => ({type: 'request', sandbox: 'sb-one', entry: request(`r${i}.test`, i % 2 ? 'blocked' : 'allowed')})),
  ])

  it('fills exactly the terminal\'s height, with the keys on the last line and the newest requests above', () => {
    for (const height of [40, 20, 12]) {
      const lines = text(buildFrame(state, height, now))
      expect(lines).toHaveLength(height)
      expect(lines.at(-1)).toMatch(/^o allow once/)
    }
    const lines = text(buildFrame(state, 40, now))
    expect(lines[0]).toBe('agent-sandbox watch  2 sandboxes · 2 pending · 0 pushes to review · 10:05:00 UTC')
    expect(lines[2]).toMatch(/^sb-one\s+app\s+bind\s+-\s+running\s+2h05m\s+12\.3%\s+50MiB$/)
    expect(lines[3]).toMatch(/^sb-off\s+app\s+bind\s+-\s+exited\s+-\s+-\s+-$/)
    expect(lines).toContain('> sb-one  a.test  (host, 1×)')
    expect(lines).toContain('  sb-one  b.test  (host, 1×)')
    expect(lines.at(-3)).toContain('r29.test')
    expect(lines.find((l) => l.includes('r29.test'))).toContain('BLOCKED')
    expect(text(buildFrame(moveSelection(state, 1), 40, now))).toContain('> sb-one  b.test  (host, 1×)')
  })

  it('says it is reading the engine until the first listing', () => {
    expect(text(buildFrame(initialState(), 5, now))[1]).toBe('reading the engine…')
  })

  it('cuts every line to the width, counting characters, not bytes', () => {
    expect(paint([{text: 'ab·cd'}, {text: 'efg', style: 'blocked'}], 4, false)).toBe('ab·c')
    expect(paint([{text: 'ab'}, {text: 'cdef', style: 'blocked'}], 4, true)).toBe('ab\x1b[1;31mcd\x1b[0m')
  })

  it('colours blocked requests and the selection, and prints no escape code at all without colour', () => {
    const coloured = buildFrame(state, 40, now).map((l) => paint(l, 200, true)).join('\n')
    expect(coloured).toContain('\x1b[1;31m')
    expect(coloured).toContain('\x1b[7m')
    const plain = buildFrame(state, 40, now).map((l) => paint(l, 200, false)).join('\n')
    expect(plain).not.toContain('\x1b')
    expect(plain).toContain('BLOCKED') // the word says it without colour
  })

  it('honours NO_COLOR (set and not empty) and TERM=dumb', () => {
    expect(colorEnabled({TERM: 'xterm'})).toBe(true)
    expect(colorEnabled({TERM: 'xterm', NO_COLOR: '1'})).toBe(false)
    expect(colorEnabled({TERM: 'xterm', NO_COLOR: ''})).toBe(true)
    expect(colorEnabled({TERM: 'dumb'})).toBe(false)
  })

  it('formats uptimes', () => {
    expect(formatUptime('2026-11-29T10:04:18.000Z', now)).toBe('42s')
    expect(formatUptime('2026-11-29T10:00:00.000Z', now)).toBe('5m')
    expect(formatUptime('2026-11-26T06:00:00.000Z', now)).toBe('3d04h')
    expect(formatUptime(undefined, now)).toBe('-')
  })
})

describe('engine stats', () => {
  it('computes CPU and memory as docker stats does', () => {
    const raw = {
      cpu_stats: {cpu_usage: {total_usage: 3_000_000}, system_cpu_usage: 20_000_000, online_cpus: 2},
      precpu_stats: {cpu_usage: {total_usage: 1_000_000}, system_cpu_usage: 10_000_000},
      memory_stats: {usage: 100, stats: {inactive_file: 30}},
    }
    expect(usageOf({...raw, read: '2026-11-29T10:00:00.000Z'})).toEqual({cpuPercent: 40, memoryBytes: 70, cpu: {total: 3_000_000, readAt: Date.parse('2026-11-29T10:00:00.000Z')}})
    expect(usageOf({memory_stats: {usage: 10, stats: {total_inactive_file: 4}}})).toEqual({memoryBytes: 6})
    expect(usageOf({})).toEqual({})
  })

  it("gives no percentage from Podman's one-shot answer alone (no previous sample), and one between two samples", () => {
    const first = usageOf({read: '2026-11-29T10:00:00.000Z', cpu_stats: {cpu_usage: {total_usage: 30_000_000}, system_cpu_usage: 10_000_000_000, online_cpus: 2}, precpu_stats: {cpu_usage: {total_usage: 0}}})
    expect(first).toEqual({cpu: {total: 30_000_000, readAt: Date.parse('2026-11-29T10:00:00.000Z')}})
    // 1.5 s of CPU time in 2 s: 75% of one CPU.
    expect(cpuPercentBetween({total: 30_000_000, readAt: 1000}, {total: 1_530_000_000, readAt: 3000})).toBe(75)
    expect(cpuPercentBetween({total: 1, readAt: 5}, {total: 2, readAt: 5})).toBeUndefined()
  })
})

describe('watch: gathering', () => {
  let dir = ''
  afterEach(() => {
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('reports the sandboxes at once, then their start time, then their CPU and memory, and only what changed', async () => {
    dir = mkdtempSync(join(tmpdir(), 'watch-unit-'))
    const labels = {[Labels.workspace]: dir, [Labels.repo]: 'app', [Labels.mode]: 'bind', [Labels.network]: 'none'}
    const list = vi.fn(async () => [{id: 'id1', name: 'sb', image: 'img', state: 'running', status: 'Up 1 minute', labels}])
    const engine = fakeEngine({
      containers: {
        list,
        inspect: vi.fn(async () => containerInfo({name: 'sb', running: true, status: 'running', startedAt: '2026-11-29T10:00:00.000Z', labels})),
        stats: vi.fn(async () => ({pids: 3, pidsLimit: 100, cpuPercent: 5, memoryBytes: 1024})),
      },
    })
    const events: WatchEvent[] = []
    const stop = new AbortController()
    const gatherer = startGatherer({engine}, {signal: stop.signal, intervalMs: 20, onEvent: (e) => events.push(e)})
    await vi.waitFor(() => expect(list.mock.calls.length).toBeGreaterThanOrEqual(3))
    stop.abort()
    await gatherer.done
    const listings = events.filter((e) => e.type === 'sandboxes')
    expect(listings.map((e) => e.type === 'sandboxes' && e.sandboxes[0])).toEqual([
      // The rows first (a first frame waits for nothing else), then with their start time, then with their usage.
      {name: 'sb', repo: 'app', path: dir, mode: 'bind', branch: '', state: 'running', running: true, network: 'none'},
      {name: 'sb', repo: 'app', path: dir, mode: 'bind', branch: '', state: 'running', running: true, network: 'none', startedAt: '2026-11-29T10:00:00.000Z'},
      {name: 'sb', repo: 'app', path: dir, mode: 'bind', branch: '', state: 'running', running: true, network: 'none', startedAt: '2026-11-29T10:00:00.000Z', cpuPercent: 5, memoryBytes: 1024},
    ])
    // No firewall: nothing pending, said once however many polls.
    expect(events.filter((e) => e.type === 'pending')).toEqual([{type: 'pending', sandbox: 'sb', pending: []}])
  })
})
