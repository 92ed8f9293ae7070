/**
 * A sandbox heals itself after faults made from outside, as the engine, the
 * user's tools or a crash make them: after each, the user's next ordinary
 * command (`exec`) repairs what is broken, one line per repair, and then the
 * web through the gateway, `git push host` and `doctor` all pass. Also: the
 * push's one line inside while the gate is down, and `start` repairing a
 * running sandbox. The engine daemon's own restart is engine-restart.test.ts
 * (it stops every container on the engine). Runs on Docker and Podman.
 */
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cli, docker} from './helpers.js'
import {must} from './test-sites.js'
import {GATE_DOWN_LINE, healFixture, repairLines, type HealFixture} from './heal-fixture.js'

let f: HealFixture

beforeAll(async () => {
  f = await healFixture('heal')
})
afterAll(async () => {
  await f?.cleanup()
})

/** A repair line for a sidecar: which one, and why. */
const repaired = (what: 'push gate' | 'egress gateway', why: string) => new RegExp(`^repairing \\S+: its ${what} \\S+ ${why}; making it anew$`)
const gateLine = (why: string) => repaired('push gate', why)
const gatewayLine = (why: string) => repaired('egress gateway', why)
/** Each line of the repair report, without the reporter's prefix. */
const reported = (stderr: string) => repairLines(stderr).map((l) => l.replace(/^.*?(repairing )/, '$1'))

describe('each fault from outside, then the next exec, the web, git push host and doctor', () => {
  it('no fault (the control): nothing is repaired', async () => {
    expect(reported(await f.check('control'))).toEqual([])
  })

  it('the sandbox restarted by the engine: both sidecars are made anew (they served the namespace of the earlier start)', async () => {
    must(await docker('restart', '-t', '1', f.sandbox), 'restart the sandbox')
    const lines = reported(await f.check('restarted'))
    expect(lines.length, lines.join('\n')).toBe(2)
    expect(lines.some((l) => /push gate/.test(l))).toBe(true)
    expect(lines.some((l) => /egress gateway/.test(l))).toBe(true)
  })

  it('the gate killed: the gate alone is made anew', async () => {
    must(await docker('kill', f.gate), 'kill the gate')
    expect(reported(await f.check('gate-killed'))).toEqual([expect.stringMatching(gateLine('was stopped'))])
  })

  it('the gateway killed: the gateway alone is made anew', async () => {
    must(await docker('kill', f.gateway), 'kill the gateway')
    expect(reported(await f.check('gateway-killed'))).toEqual([expect.stringMatching(gatewayLine('was stopped'))])
  })

  it('all three restarted by the engine: what lost its state or its namespace is made anew', async () => {
    must(await docker('restart', '-t', '1', f.sandbox, f.gate, f.gateway), 'restart all three')
    const lines = reported(await f.check('all-restarted'))
    // The gateway restarted on its own holds no CA or secrets (only the host has them): it never listens.
    expect(lines.some((l) => gatewayLine('.*').test(l)), lines.join('\n')).toBe(true)
  })

  it('the sandbox stopped: the next exec starts it with both sidecars', async () => {
    must(await docker('stop', '-t', '1', f.sandbox), 'stop the sandbox')
    expect(reported(await f.check('stopped'))).toEqual([])
  })

  it('both sidecars removed: both are made anew', async () => {
    must(await docker('rm', '-f', f.gate, f.gateway), 'remove the sidecars')
    const lines = reported(await f.check('removed'))
    expect(lines).toEqual(expect.arrayContaining([expect.stringMatching(gateLine('was missing')), expect.stringMatching(gatewayLine('was missing'))]))
    expect(lines).toHaveLength(2)
  })
})

describe('the gate down, seen from inside', () => {
  it('git push host fails with one line naming the repair, never git\'s own connection error; doctor names the repair; the next exec heals it', async () => {
    must(await docker('kill', f.gate), 'kill the gate')
    // Straight through the engine, as an agent's own process meets it: nothing repairs it on the way.
    const push = await docker('exec', '-u', 'node', f.sandbox, '/usr/local/bin/sandbox-exec', 'git', 'push', 'host', 'HEAD:refs/heads/while-down')
    expect(push.exitCode).toBe(128)
    expect(push.stderr.trim()).toBe(GATE_DOWN_LINE)
    const doctor = await cli(['doctor', f.ws, '--json'])
    expect(doctor.exitCode).toBe(1)
    const row = JSON.parse(doctor.stdout).checks.find((c: any) => c.name === 'sidecar-gate')
    expect(row).toMatchObject({status: 'fail'})
    expect(row.detail).toMatch(/was stopped; repair: run agent-sandbox start \(or any exec or shell\) on the host, which makes it anew$/)
    expect(reported(await f.check('after-down'))).toEqual([expect.stringMatching(gateLine('was stopped'))])
  })
})

describe('start on a running but broken sandbox', () => {
  it('repairs it and says "repaired", not "already running"; on a whole sandbox it says "already running"', async () => {
    must(await docker('kill', f.gateway), 'kill the gateway')
    const r = await cli(['start', f.ws])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.trim()).toBe(`${f.sandbox} repaired`)
    expect(reported(r.stderr)).toEqual([expect.stringMatching(gatewayLine('was stopped'))])
    expect(reported(await f.check('start-repaired'))).toEqual([])
    const again = await cli(['start', f.ws])
    expect(again.stdout.trim()).toBe(`${f.sandbox} already running`)
    expect(reported(again.stderr)).toEqual([])
  })
})
