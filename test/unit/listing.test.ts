import {describe, expect, it, vi} from 'vitest'
import type {ContainerSummary} from '../../src/lib/engine/index.js'
import {containerInfo, fakeEngine} from './fake-engine.js'
import {byCodeUnits, formatLastUsed, formatSandboxTable, listSandboxes} from '../../src/lib/sandbox/listing.js'

type Row = ContainerSummary

const row = (name: string, path: string, branch = '', labels: Record<string, string> = {}): Row => ({
  id: name,
  name,
  image: 'img',
  state: 'exited',
  status: 'Exited (0)',
  labels: {
    'dev.agent-sandbox.workspace': path,
    'dev.agent-sandbox.branch': branch,
    'dev.agent-sandbox.mode': branch ? 'branch' : 'bind',
    'dev.agent-sandbox.repo': path.split('/').at(-1) ?? '',
    ...labels,
  },
})

const STOPPED_AT = '2026-11-20T10:00:00.000Z'

function engineListing(rows: Row[]) {
  const list = vi.fn(async (_labels: Record<string, string>) => rows)
  // Stopped sandboxes are inspected for their stop time.
  const inspect = vi.fn(async (id: string) => containerInfo({name: id, finishedAt: STOPPED_AT, startedAt: '2026-11-20T09:00:00.000Z'}))
  return {engine: fakeEngine({containers: {list, inspect}}), list, inspect}
}

describe('listSandboxes', () => {
  it('asks the engine once, by label, and orders rows by path then branch in code-unit order', async () => {
    const {engine, list} = engineListing([
      row('c', '/src/alpha', 'feat/b'),
      row('d', '/src/Zeta'),
      row('a', '/src/alpha', 'feat/a'),
      row('b', '/src/alpha'),
      row('e', '/src/älter'),
    ])
    const rows = await listSandboxes({engine})
    expect(list).toHaveBeenCalledTimes(1)
    expect(list).toHaveBeenCalledWith({'dev.agent-sandbox.managed': 'true', 'dev.agent-sandbox.kind': 'sandbox'})
    // Upper case before lower case, and non-ASCII last, as `ls` sorts in the C locale: the same everywhere.
    expect(rows.map((r) => `${r.path} ${r.branch}`)).toEqual(['/src/Zeta ', '/src/alpha ', '/src/alpha feat/a', '/src/alpha feat/b', '/src/älter '])
  })

  it('reads every column from the labels, with defaults for missing ones and a bad limits label', async () => {
    const {engine} = engineListing([
      {...row('s', '/w/app', '', {'dev.agent-sandbox.limits': '{"memory":"1g"}', 'dev.agent-sandbox.volumes': 'v1,v2', 'dev.agent-sandbox.network': 'none'}), state: 'running', status: 'Up 1 second'},
      {...row('t', '/w/old', '', {'dev.agent-sandbox.limits': 'not json'}), labels: {'dev.agent-sandbox.workspace': '/w/old', 'dev.agent-sandbox.limits': 'not json'}},
    ])
    const [app, old] = await listSandboxes({engine})
    expect(app).toEqual({
      name: 's', repo: 'app', path: '/w/app', mode: 'bind', branch: '', workdir: '', status: 'Up 1 second', running: true,
      image: 'img', network: 'none', volumes: ['v1', 'v2'], limits: {memory: '1g'}, github: null, lastUsed: null,
    })
    expect(old).toMatchObject({repo: '', mode: 'bind', limits: {}, volumes: [], running: false, lastUsed: STOPPED_AT})
  })

  it('inspects only sandboxes that ran and stopped, for when they stopped; one never started was never used', async () => {
    const {engine, inspect} = engineListing([
      {...row('up', '/w/a'), state: 'running'},
      row('down', '/w/b'),
      {...row('new', '/w/c'), state: 'created', status: 'Created'},
      {...row('podman-new', '/w/d'), state: 'configured', status: 'Created'},
    ])
    const rows = await listSandboxes({engine})
    expect(inspect.mock.calls).toEqual([['down']])
    expect(rows.map((r) => [r.name, r.lastUsed])).toEqual([['up', null], ['down', STOPPED_AT], ['new', null], ['podman-new', null]])
  })
})

describe('byCodeUnits', () => {
  it('is a total order by UTF-16 code units', () => {
    expect(['b', 'B', 'a', '_', 'ä', 'A'].sort(byCodeUnits)).toEqual(['A', 'B', '_', 'a', 'b', 'ä'])
    expect(byCodeUnits('x', 'x')).toBe(0)
  })
})

describe('formatSandboxTable', () => {
  it('says so when there are none, and aligns columns otherwise', async () => {
    expect(formatSandboxTable([])).toEqual(['no sandboxes'])
    const {engine} = engineListing([
      {...row('sbx-long-name', '/w/app', 'feat/x', {'dev.agent-sandbox.workdir': '/repo-shelf/worktrees/feat-x', 'dev.agent-sandbox.limits': '{"cpus":2,"pids":64}'}), state: 'running'},
      row('s2', '/w/b'),
    ])
    expect(formatSandboxTable(await listSandboxes({engine}), Date.parse(STOPPED_AT) + 3 * 86_400_000 + 5000)).toEqual([
      'NAME           REPO  MODE    BRANCH  STATUS      LAST USED   WORKDIR                       LIMITS          PATH',
      'sbx-long-name  app   branch  feat/x  running     now         /repo-shelf/worktrees/feat-x  cpus=2 pids=64  /w/app',
      's2             b     bind    -       Exited (0)  3 days ago                                -               /w/b',
    ])
  })

  it('says how long ago a sandbox was last used, in the largest whole unit', () => {
    const at = Date.parse(STOPPED_AT)
    const stopped = {running: false, lastUsed: STOPPED_AT}
    expect(formatLastUsed(stopped, at + 1000)).toBe('1 second ago')
    expect(formatLastUsed(stopped, at + 59 * 60_000)).toBe('59 minutes ago')
    expect(formatLastUsed(stopped, at + 2 * 3_600_000)).toBe('2 hours ago')
    expect(formatLastUsed(stopped, at + 86_400_000)).toBe('1 day ago')
    expect(formatLastUsed({running: false, lastUsed: null}, at)).toBe('never')
    expect(formatLastUsed({running: true, lastUsed: null}, at)).toBe('now')
  })
})
