/**
 * Root's own steps in the sandbox (the entrypoint's set-up, firewall allow and
 * status, doctor's root part) run with the image's environment, not the
 * container's, which carries the agent's settings: tools such as curl, iptables,
 * git and the dynamic linker read configuration and code from variables. The
 * agent's own commands, and a one-shot run's command, keep them.
 */
import {mkdirSync, mkdtempSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, TEST_ROOT} from './helpers.js'

const PRELOAD = 'agent-sandbox-test-no-such-lib.so'
let ws: string
let env: Record<string, string>
let name: string

beforeAll(async () => {
  ws = await makeWorkspace('rootenv')
  await initWorkspace(ws)
  // The user's own settings (trusted): a variable every dynamic program reads.
  const config = mkdtempSync(join(TEST_ROOT, 'cfg-'))
  mkdirSync(join(config, 'agent-sandbox'))
  writeFileSync(join(config, 'agent-sandbox', 'config.json'), JSON.stringify({env: {LD_PRELOAD: PRELOAD}}))
  env = {XDG_CONFIG_HOME: config}
  const start = await cli(['start', ws, '--json'], {env})
  expect(start.exitCode, start.stderr).toBe(0)
  name = JSON.parse(start.stdout).name
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  removeWorkspace(ws)
})

describe("root's steps run without the sandbox's environment", () => {
  it("set-up ran clean (the dynamic linker never saw the setting), while the agent's commands have it", async () => {
    const logs = await docker('logs', name)
    expect(`${logs.stdout}\n${logs.stderr}`).not.toContain(PRELOAD)
    expect(`${logs.stdout}\n${logs.stderr}`).toContain('agent-sandbox: ready')
    // control: the agent's own processes do get it (the linker complains about it)
    const agent = await cli(['exec', ws, '--', 'sh', '-c', 'printf %s "$LD_PRELOAD"'], {env})
    expect(agent.stdout).toBe(PRELOAD)
    expect(agent.stderr).toContain(`object '${PRELOAD}' from LD_PRELOAD cannot be preloaded`)
  })

  it('firewall status and doctor, run as root, are clean too', async () => {
    const status = await cli(['firewall', 'status', ws], {env})
    expect(status.exitCode, status.stderr).toBe(0)
    expect(`${status.stdout}\n${status.stderr}`).not.toContain('cannot be preloaded')
    const root = await docker('exec', '-u', 'root', name, '/usr/local/bin/firewall-status')
    expect(root.stderr).not.toContain('cannot be preloaded')
  })

  it("a one-shot run's command gets the environment back, once it is node's", async () => {
    const r = await cli(['run', ws, '--', 'sh', '-c', 'printf "%s %s" "$LD_PRELOAD" "$(id -un)"'], {env})
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toBe(`${PRELOAD} node`)
  })
})
