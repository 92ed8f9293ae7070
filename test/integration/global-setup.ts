/**
 * Integration set-up: the engine must answer and the base image must exist
 * (built here through the CLI if missing). Nothing is skipped: if the engine
 * is down, the suite fails and says how to start it.
 */
import {execa} from 'execa'
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import {BASE_IMAGE, BIN, cleanupUnder, REPO, TEST_ROOT} from './helpers.js'

export default async function setup(): Promise<() => Promise<void>> {
  if (!existsSync(join(REPO, 'dist', 'commands'))) {
    throw new Error('the CLI is not built: run `npm run build` first')
  }
  const info = await execa('docker', ['info', '--format', '{{.ServerVersion}}'], {reject: false})
  if (info.exitCode !== 0) {
    throw new Error(`no container engine answers (docker info: ${info.stderr.trim()}); run scripts/setup-engine.sh`)
  }
  const base = await execa('docker', ['image', 'inspect', BASE_IMAGE], {reject: false})
  if (base.exitCode !== 0) {
    const certs = process.env.AGENT_SANDBOX_CA_CERTS ?? (existsSync('/etc/ssl/certs/ca-certificates.crt') ? '/etc/ssl/certs/ca-certificates.crt' : '')
    await execa(BIN, ['build-base', '--tag', BASE_IMAGE.split(':')[1]], {env: {AGENT_SANDBOX_CA_CERTS: certs}, stdout: 'inherit', stderr: 'inherit'})
  }
  await cleanupUnder(TEST_ROOT)
  return async () => {
    await cleanupUnder(TEST_ROOT)
  }
}
