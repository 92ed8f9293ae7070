/**
 * `prune` and `list`'s LAST USED on the real engine. Every call is limited to
 * this file's own directory of workspaces (prune's path argument), so that
 * nothing else on the engine is touched.
 */
import {existsSync, mkdirSync, mkdtempSync, renameSync, rmSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, initWorkspace, makeWorkspace, TEST_ROOT} from './helpers.js'

mkdirSync(TEST_ROOT, {recursive: true})
const ROOT = mkdtempSync(join(TEST_ROOT, 'prune-'))

afterAll(async () => {
  await cleanupUnder(ROOT)
  rmSync(ROOT, {recursive: true, force: true})
})

/** A workspace under ROOT (makeWorkspace makes a parent of its own there). */
async function workspace(role: string): Promise<string> {
  const made = await makeWorkspace(role)
  const path = join(ROOT, role)
  renameSync(made, path)
  rmSync(join(made, '..'), {recursive: true, force: true})
  await initWorkspace(path)
  return path
}

async function start(path: string): Promise<string> {
  const r = await cli(['start', path, '--build', '--json'])
  expect(r.exitCode, r.stderr).toBe(0)
  return JSON.parse(r.stdout).name as string
}

const exists = async (container: string) => (await docker('container', 'inspect', container)).exitCode === 0
const volumesOf = async (path: string) =>
  (await docker('volume', 'ls', '-q', '--filter', `label=dev.agent-sandbox.workspace=${path}`)).stdout.split('\n').filter(Boolean).sort()

describe('prune', () => {
  let stopped: string
  let running: string
  let gone: string
  const names: Record<string, string> = {}

  beforeAll(async () => {
    stopped = await workspace('stopped')
    running = await workspace('running')
    gone = await workspace('gone')
    names.stopped = await start(stopped)
    names.running = await start(running)
    names.gone = await start(gone)
    for (const path of [stopped, gone]) expect((await cli(['stop', path])).exitCode).toBe(0)
    rmSync(gone, {recursive: true, force: true})
  })

  it('list shows when each sandbox was last used', async () => {
    const r = await cli(['list'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout.split('\n')[0]).toContain('LAST USED')
    const rows = JSON.parse((await cli(['list', '--json'])).stdout) as Array<{name: string; lastUsed: string | null; running: boolean}>
    const row = (name: string) => rows.find((x) => x.name === name)
    expect(row(names.running)).toMatchObject({running: true, lastUsed: null})
    const last = Date.parse(row(names.stopped)?.lastUsed ?? '')
    expect(Date.now() - last).toBeGreaterThanOrEqual(0)
    expect(Date.now() - last).toBeLessThan(3_600_000)
    expect(r.stdout.split('\n').find((l) => l.startsWith(names.stopped))).toMatch(/ago/)
  })

  it('refuses a bad duration and a missing path in one line', async () => {
    const age = await cli(['prune', ROOT, '--older-than', '7y'])
    expect(age.exitCode).toBe(2)
    expect(age.stderr.trim().split('\n')[0]).toMatch(/--older-than is not a duration: "7y"/)
    const path = await cli(['prune', join(ROOT, 'nowhere'), '--dry-run'])
    expect(path.exitCode).toBe(2)
    expect(path.stderr.trim().split('\n')[0]).toMatch(/workspace path does not exist/)
  })

  it('--older-than keeps what was used more recently', async () => {
    const r = await cli(['prune', ROOT, '--older-than', '1d', '--dry-run', '--json'])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout)).toEqual({sandboxes: [], orphans: [], volumes: []})
  })

  it('--dry-run lists exactly what prune then removes: stopped and gone sandboxes with their sidecars and volumes, never a running one', async () => {
    const volumesBefore = {stopped: await volumesOf(stopped), running: await volumesOf(running), gone: await volumesOf(gone)}
    expect(volumesBefore.gone.length).toBeGreaterThan(0)
    const dry = await cli(['prune', ROOT, '--volumes', '--dry-run', '--json'])
    expect(dry.exitCode, dry.stderr).toBe(0)
    const plan = JSON.parse(dry.stdout)
    expect(plan.sandboxes.map((s: {name: string; reason: string}) => [s.name, s.reason]).sort()).toEqual(
      [[names.gone, 'workspace gone'], [names.stopped, 'stopped']].sort(),
    )
    expect(plan.volumes).toEqual([...volumesBefore.stopped, ...volumesBefore.gone].sort())
    // Nothing removed by the dry run.
    expect(await exists(names.stopped)).toBe(true)
    expect(await exists(names.gone)).toBe(true)

    const real = await cli(['prune', ROOT, '--volumes', '--json'])
    expect(real.exitCode, real.stderr).toBe(0)
    const done = JSON.parse(real.stdout)
    expect(done.skipped).toEqual([])
    delete done.skipped
    expect(done).toEqual(plan)
    for (const s of plan.sandboxes as Array<{name: string; sidecars: string[]}>) {
      expect(await exists(s.name)).toBe(false)
      for (const sidecar of s.sidecars) expect(await exists(sidecar)).toBe(false)
    }
    expect(await volumesOf(stopped)).toEqual([])
    expect(await volumesOf(gone)).toEqual([])
    // The running sandbox, its gate and gateway, and its volumes stay.
    expect((await docker('container', 'inspect', '--format', '{{.State.Running}}', names.running)).stdout.trim()).toBe('true')
    expect(await exists(`${names.running}-gateway`)).toBe(true)
    expect(await volumesOf(running)).toEqual(volumesBefore.running)
    expect(existsSync(stopped)).toBe(true)
    const after = await cli(['prune', ROOT, '--volumes', '--dry-run', '--json'])
    expect(JSON.parse(after.stdout)).toEqual({sandboxes: [], orphans: [], volumes: []})
  })

  it('without --volumes keeps every volume', async () => {
    expect((await cli(['stop', running])).exitCode).toBe(0)
    const before = await volumesOf(running)
    const r = await cli(['prune', running])
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toContain(`sandbox ${names.running} (stopped`)
    expect(await exists(names.running)).toBe(false)
    expect(await volumesOf(running)).toEqual(before)
  })
})
