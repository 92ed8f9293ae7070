import {describe, expect, it} from 'vitest'
import type {ContainerSummary, VolumeInfo} from '../../src/lib/engine/index.js'
import {parseAge, planPrune, type SandboxFacts} from '../../src/lib/sandbox/prune.js'

const DAY = 86_400_000
const NOW = Date.parse('2026-11-28T12:00:00Z')

const sandbox = (name: string, fields: Partial<SandboxFacts> = {}): SandboxFacts => ({
  id: name, name, path: `/w/${name}`, hash: `h-${name}`, branch: '', running: false, lastUsed: NOW - DAY, ...fields,
})
const sidecar = (name: string, of: string, kind: 'gate' | 'gateway', state = 'exited'): ContainerSummary => ({
  id: name, name, image: 'img', state, status: state,
  labels: {'dev.agent-sandbox.kind': kind, [kind === 'gate' ? 'dev.agent-sandbox.gate-of' : 'dev.agent-sandbox.gateway-of']: of, 'dev.agent-sandbox.workspace': `/w/${of}`},
})
const volume = (name: string, hash: string, path: string): VolumeInfo => ({name, mountpoint: '', labels: {'dev.agent-sandbox.hash': hash, 'dev.agent-sandbox.workspace': path}})

function plan(sandboxes: SandboxFacts[], options: Parameters<typeof planPrune>[1] = {}, extra: {sidecars?: ContainerSummary[]; volumes?: VolumeInfo[]; gone?: string[]} = {}) {
  return planPrune({sandboxes, sidecars: extra.sidecars ?? [], volumes: extra.volumes ?? [], workspaceExists: (p) => !(extra.gone ?? []).includes(p), now: NOW}, options)
}

describe('planPrune', () => {
  it('takes stopped sandboxes with their sidecars, never a running one', () => {
    const p = plan([sandbox('a'), sandbox('b', {running: true})], {}, {sidecars: [sidecar('a-gate', 'a', 'gate'), sidecar('a-gateway', 'a', 'gateway'), sidecar('b-gate', 'b', 'gate', 'running')]})
    expect(p.sandboxes.map((s) => [s.name, s.reason, s.sidecars])).toEqual([['a', 'stopped', ['a-gate', 'a-gateway']]])
    expect(p.orphans).toEqual([])
  })

  it('says when the workspace is gone', () => {
    expect(plan([sandbox('a')], {}, {gone: ['/w/a']}).sandboxes[0].reason).toBe('workspace gone')
  })

  it('keeps what was used more recently than --older-than', () => {
    const p = plan([sandbox('old', {lastUsed: NOW - 8 * DAY}), sandbox('new', {lastUsed: NOW - 6 * DAY})], {olderThanMs: 7 * DAY})
    expect(p.sandboxes.map((s) => s.name)).toEqual(['old'])
  })

  it('takes volumes only with volumes, and only of workspaces left without a sandbox', () => {
    const sandboxes = [sandbox('a'), sandbox('b', {running: true}), sandbox('c', {hash: 'h-a', branch: 'feat', running: true})]
    const volumes = [volume('va', 'h-a', '/w/a'), volume('vb', 'h-b', '/w/b'), volume('vgone', 'h-x', '/w/x'), {name: 'shared', mountpoint: '', labels: {'dev.agent-sandbox.volume': 'agent-config'}}]
    expect(plan(sandboxes, {}, {volumes}).volumes).toEqual([])
    // a's workspace keeps its volume while its branch sandbox c runs; b runs; x has no sandbox left; shared has no workspace.
    expect(plan(sandboxes, {volumes: true}, {volumes}).volumes).toEqual(['vgone'])
    expect(plan([sandbox('a')], {volumes: true}, {volumes}).volumes).toEqual(['va', 'vb', 'vgone'])
  })

  it('with a directory, only the sandboxes, sidecars and volumes of workspaces at or under it', () => {
    const volumes = [volume('va', 'h-a', '/w/a'), volume('vb', 'h-b', '/w/b'), volume('vab', 'h-ab', '/w/ab')]
    const sandboxes = [sandbox('a'), sandbox('b'), sandbox('ab'), sandbox('a/x', {hash: 'h-ax'})]
    const p = plan(sandboxes, {under: '/w/a', volumes: true}, {volumes, sidecars: [sidecar('z-gate', 'z', 'gate')]})
    expect(p.sandboxes.map((s) => s.name)).toEqual(['a', 'a/x'])
    expect(p.volumes).toEqual(['va'])
    expect(p.orphans).toEqual([])
    expect(plan(sandboxes, {under: '/w'}).sandboxes).toHaveLength(4)
  })

  it('takes stopped sidecars whose sandbox is gone', () => {
    expect(plan([], {}, {sidecars: [sidecar('z-gate', 'z', 'gate'), sidecar('y-gateway', 'y', 'gateway', 'running')]}).orphans).toEqual(['z-gate'])
  })
})

describe('parseAge', () => {
  it('reads seconds, minutes, hours, days and weeks', () => {
    expect(parseAge('90')).toBe(90_000)
    expect(parseAge('30m')).toBe(1_800_000)
    expect(parseAge('12h')).toBe(43_200_000)
    expect(parseAge('7d')).toBe(7 * DAY)
    expect(parseAge('2w')).toBe(14 * DAY)
    expect(parseAge('1.5d')).toBe(1.5 * DAY)
  })

  it('refuses anything else in one line naming the flag', () => {
    for (const bad of ['', '7 days', '-1d', '7y', 'd']) expect(() => parseAge(bad)).toThrow(/--older-than is not a duration/)
  })
})
