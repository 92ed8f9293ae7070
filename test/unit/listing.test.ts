import {describe, expect, it, vi} from 'vitest'
import type {ContainerSummary} from '../../src/lib/engine/index.js'
import {fakeEngine} from './fake-engine.js'
import {byCodeUnits, formatSandboxTable, listSandboxes} from '../../src/lib/sandbox/listing.js'

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

function engineListing(rows: Row[]) {
  const list = vi.fn(async (_labels: Record<string, string>) => rows)
  return {engine: fakeEngine({containers: {list}}), list}
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
      image: 'img', network: 'none', volumes: ['v1', 'v2'], limits: {memory: '1g'}, github: null,
    })
    expect(old).toMatchObject({repo: '', mode: 'bind', limits: {}, volumes: [], running: false})
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
    expect(formatSandboxTable(await listSandboxes({engine}))).toEqual([
      'NAME           REPO  MODE    BRANCH  STATUS      WORKDIR                       LIMITS          PATH',
      'sbx-long-name  app   branch  feat/x  running     /repo-shelf/worktrees/feat-x  cpus=2 pids=64  /w/app',
      's2             b     bind    -       Exited (0)                                -               /w/b',
    ])
  })
})
