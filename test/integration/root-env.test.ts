/**
 * Root's own steps in the sandbox (the entrypoint's set-up, firewall allow and
 * status, doctor's root part) run with the image's environment, not the
 * container's, which carries the agent's settings: root's tools read
 * configuration and code from variables. XTABLES_LIBDIR is one: iptables loads
 * its extensions from it, so with it set the firewall could not even be
 * installed. The agent's own commands, and a one-shot run's command, keep it.
 */
import {mkdirSync, mkdtempSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, TEST_ROOT} from './helpers.js'

const LIBDIR = '/nonexistent-xtables'
let ws: string
let env: Record<string, string>

beforeAll(async () => {
  ws = await makeWorkspace('rootenv')
  await initWorkspace(ws)
  // The user's own settings (trusted): a variable root's iptables reads.
  const config = mkdtempSync(join(TEST_ROOT, 'cfg-'))
  mkdirSync(join(config, 'agent-sandbox'))
  writeFileSync(join(config, 'agent-sandbox', 'config.json'), JSON.stringify({env: {XTABLES_LIBDIR: LIBDIR}}))
  env = {XDG_CONFIG_HOME: config}
})

afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  removeWorkspace(ws)
})

describe("root's steps run without the sandbox's environment", () => {
  it("root's processes started by the entrypoint run without the variable, which the container itself has", async () => {
    const start = await cli(['start', ws, '--json'], {env})
    expect(start.exitCode, start.stderr).toBe(0)
    const name = JSON.parse(start.stdout).name
    // As root: PID 1 (tini) got the container's environment; mount-watch is one of root's set-up steps.
    const environ = async (pidfile: string) => {
      const r = await docker('exec', '-u', 'root', name, 'sh', '-c', `tr '\\0' '\\n' < /proc/$(head -n 1 ${pidfile})/environ`)
      expect(r.exitCode, r.stderr).toBe(0)
      return r.stdout
    }
    const pid1 = await docker('exec', '-u', 'root', name, 'sh', '-c', "tr '\\0' '\\n' < /proc/1/environ")
    expect(pid1.stdout).toContain(`XTABLES_LIBDIR=${LIBDIR}`)
    const watch = await environ('/run/agent-sandbox/mount-watch.pid')
    expect(watch).toContain('AGENT_SANDBOX_')
    expect(watch).not.toContain('XTABLES_LIBDIR')
  })

  it("the firewall is installed and firewall status reads it as root (with the variable, iptables could not load its extensions); the agent's commands keep it", async () => {
    const status = await cli(['firewall', 'status', ws, '--json'], {env})
    expect(status.exitCode, status.stderr).toBe(0)
    expect(JSON.stringify(JSON.parse(status.stdout))).toMatch(/owner/)
    const agent = await cli(['exec', ws, '--', 'printenv', 'XTABLES_LIBDIR'], {env})
    expect(agent.stdout).toBe(LIBDIR)
  })

  it('doctor (root part included) passes', async () => {
    const r = await cli(['doctor', ws], {env})
    expect(r.exitCode, `${r.stdout}\n${r.stderr}`).toBe(0)
  })

  it("a one-shot run's command gets the environment back, once it is node's", async () => {
    const r = await cli(['run', ws, '--', 'sh', '-c', 'printf "%s %s" "$XTABLES_LIBDIR" "$(id -un)"'], {env})
    expect(r.exitCode, r.stderr).toBe(0)
    expect(r.stdout).toBe(`${LIBDIR} node`)
  })
})
