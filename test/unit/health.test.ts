/**
 * health.ts, the one definition of a whole sandbox: which sidecars a sandbox
 * has, why one does not serve it (missing, stopped, in the network of an
 * earlier start, not listening), the repair line, and doctor's rows.
 */
import {describe, expect, it, vi} from 'vitest'
import {engineFault, repairLine, sidecarChecks, sidecarFaults, sidecarsOf} from '../../src/lib/sandbox/health.js'
import type {ContainerInfo} from '../../src/lib/engine/index.js'
import {containerInfo, fakeEngine} from './fake-engine.js'

const T0 = '2026-11-28T10:00:00.000000000Z'
const T1 = '2026-11-28T10:05:00.000000000Z'
const sandbox = containerInfo({
  name: 'sbx',
  running: true,
  startedAt: T1,
  labels: {'dev.agent-sandbox.kind': 'sandbox', 'dev.agent-sandbox.git': 'gate'},
  env: ['AGENT_SANDBOX_GATEWAY_UID=65532'],
})

function engineWith(sidecars: Record<string, ContainerInfo | undefined>, listening: number[]) {
  const exec = vi.fn(async (_id: string, cmd: string[]) => ({exitCode: 0, stdout: cmd.slice(4).filter((p) => !listening.includes(Number(p))).map((p) => `${p}\n`).join(''), stderr: ''}))
  const inspect = vi.fn(async (name: string) => sidecars[name])
  return {engine: fakeEngine({containers: {inspect, exec}}), exec, inspect}
}

describe('sidecarsOf', () => {
  it('a gate for a sandbox whose git goes through one, a gateway for one with a gateway uid', () => {
    expect(sidecarsOf(sandbox)).toEqual(['gate', 'gateway'])
    expect(sidecarsOf({labels: {'dev.agent-sandbox.kind': 'sandbox', 'dev.agent-sandbox.git': 'protected'}, env: []})).toEqual([])
    // a one-shot run in branch mode is labelled gate, but is no sandbox with one
    expect(sidecarsOf({labels: {'dev.agent-sandbox.kind': 'run', 'dev.agent-sandbox.git': 'gate'}, env: []})).toEqual([])
  })
})

describe('engineFault', () => {
  it('missing, stopped, started before the sandbox; none for one started after it', () => {
    expect(engineFault(undefined, sandbox)).toBe('was missing')
    expect(engineFault({running: false, startedAt: T1}, sandbox)).toBe('was stopped')
    expect(engineFault({running: true, startedAt: T0}, sandbox)).toBe('was left in the network of an earlier start of the sandbox')
    expect(engineFault({running: true, startedAt: T1}, sandbox)).toBeUndefined()
  })
})

describe('sidecarFaults', () => {
  const gate = containerInfo({name: 'sbx-gate', running: true, startedAt: T1})
  const gateway = containerInfo({name: 'sbx-gateway', running: true, startedAt: T1})

  it('both running, started after the sandbox and listening: no fault, one exec that connects to both ports', async () => {
    const {engine, exec} = engineWith({'sbx-gate': gate, 'sbx-gateway': gateway}, [19418, 19443])
    expect(await sidecarFaults({engine}, sandbox)).toEqual([])
    expect(exec).toHaveBeenCalledTimes(1)
    expect(exec.mock.calls[0][1].slice(4)).toEqual(['19418', '19443'])
  })

  it('a gateway running but not listening (restarted by the engine, without its secrets) is a fault', async () => {
    const {engine} = engineWith({'sbx-gate': gate, 'sbx-gateway': gateway}, [19418])
    expect(await sidecarFaults({engine}, sandbox)).toEqual([{sidecar: 'gateway', name: 'sbx-gateway', why: 'did not listen in the sandbox (it lost its state or its network in a restart)'}])
  })

  it('a missing gate and a stopped gateway: no exec, both faults', async () => {
    const {engine, exec} = engineWith({'sbx-gateway': {...gateway, running: false}}, [])
    expect((await sidecarFaults({engine}, sandbox)).map((f) => [f.sidecar, f.why])).toEqual([
      ['gate', 'was missing'],
      ['gateway', 'was stopped'],
    ])
    expect(exec).not.toHaveBeenCalled()
  })

  it('a probe that cannot run counts every running sidecar as not listening (fail closed)', async () => {
    const inspect = vi.fn(async (name: string) => (name === 'sbx-gate' ? gate : gateway))
    const exec = vi.fn(async () => ({exitCode: 126, stdout: '', stderr: 'no bash'}))
    const faults = await sidecarFaults({engine: fakeEngine({containers: {inspect, exec}})}, sandbox)
    expect(faults.map((f) => f.sidecar)).toEqual(['gate', 'gateway'])
  })
})

describe('repairLine and doctor rows', () => {
  it('one line naming the sidecar, why, and the repair', () => {
    expect(repairLine('sbx', {sidecar: 'gate', name: 'sbx-gate', why: 'was stopped'})).toBe('repairing sbx: its push gate sbx-gate was stopped; making it anew')
  })

  it('a failing row names the repair; a sandbox without a sidecar skips its row', async () => {
    const {engine} = engineWith({'sbx-gate': undefined}, [])
    const plain = {...sandbox, env: []}
    expect(await sidecarChecks({engine}, plain)).toEqual([
      {name: 'sidecar-gate', status: 'fail', detail: 'sbx-gate was missing; repair: run agent-sandbox start (or any exec or shell) on the host, which makes it anew'},
      {name: 'sidecar-gateway', status: 'skip', detail: 'this sandbox has no egress gateway'},
    ])
  })
})
