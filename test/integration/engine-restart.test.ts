/**
 * A sandbox heals itself after the engine daemon's own restart (a host reboot,
 * a daemon upgrade): scripts/restart-engine.sh restarts the daemon that
 * scripts/setup-engine.sh started, for real. On Docker (no live-restore) that
 * stops every container on the engine, so this file is its own suite,
 * `engine-restart` (scripts/test-all.sh), run only with
 * AGENT_SANDBOX_TEST_ENGINE_RESTART=1, alone on its engine; it is left out of
 * the integration suite (vitest.config.ts) and fails when run without it.
 * AGENT_SANDBOX_CI_STATE names the set-up's state directory (its pid files).
 */
import {execa} from 'execa'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {docker, inspect, REPO} from './helpers.js'
import {must} from './test-sites.js'
import {healFixture, repairLines, type HealFixture} from './heal-fixture.js'

if (process.env.AGENT_SANDBOX_TEST_ENGINE_RESTART !== '1') {
  throw new Error('engine-restart.test.ts restarts the engine daemon, stopping every container on it: run it alone, with AGENT_SANDBOX_TEST_ENGINE_RESTART=1 (scripts/test-all.sh engine-restart)')
}

const ENGINE = process.env.AGENT_SANDBOX_ENGINE === 'podman' ? 'podman' : 'docker'
let f: HealFixture

beforeAll(async () => {
  f = await healFixture('engrs')
})
afterAll(async () => {
  await f?.cleanup()
})

describe(`the ${ENGINE} daemon restarted`, () => {
  it('the next exec heals the sandbox: then the web, git push host and doctor pass', async () => {
    expect(repairLines(await f.check('before-restart'))).toEqual([])
    const before = await inspect(f.sandbox)
    const restart = await execa('bash', [join(REPO, 'scripts', 'restart-engine.sh'), ENGINE], {reject: false})
    must({exitCode: restart.exitCode ?? -1, stdout: restart.stdout, stderr: restart.stderr}, 'scripts/restart-engine.sh')
    const after = await inspect(f.sandbox)
    // Docker without live-restore stops every container with the daemon, and none has a restart policy;
    // Podman's containers run under conmon and outlive the service.
    if (ENGINE === 'docker') expect(after.State.Running).toBe(false)
    else expect(after.State.StartedAt).toBe(before.State.StartedAt)
    // The test's own site went down with the daemon too: back up, as the user's other services would be.
    if (ENGINE === 'docker') must(await docker('start', f.site), 'docker start of the test site')
    await f.check('after-restart')
  })
})
