/**
 * Behind a TLS-inspecting proxy (this machine is behind one): build-base with no
 * flag trusts the CA bundle the host names, and a build that meets a certificate
 * it does not trust ends with one line naming the problem and --ca-cert. The
 * only network traffic is the builds' own, to the npm and Debian registries.
 */
import {randomBytes} from 'node:crypto'
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {BASE_TAG, cleanupUnder, cli, docker, initWorkspace, makeWorkspace, removeWorkspace, TEST_ROOT, trustWorkspace} from './helpers.js'
import {caCertsDigest, readCaCerts} from '../../src/lib/images/ca.js'

const HOST_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'
const TAG = `${BASE_TAG}-hostca-${randomBytes(3).toString('hex')}`
/** Only the host's variable names a bundle: no flag, no AGENT_SANDBOX_CA_CERTS. */
const HOST_ENV = {NODE_EXTRA_CA_CERTS: HOST_BUNDLE, SSL_CERT_FILE: undefined, AGENT_SANDBOX_CA_CERTS: undefined}

const created: string[] = []
afterAll(async () => {
  await cleanupUnder(TEST_ROOT)
  for (const path of created) removeWorkspace(path)
  await docker('rmi', `agent-sandbox-base:${TAG}`)
})

const lastLine = (text: string) => text.trim().split('\n').at(-1) ?? ''

describe('behind a TLS-inspecting proxy', () => {
  it('build-base with no flag trusts the bundle NODE_EXTRA_CA_CERTS names, says so, and the image reaches npm', async () => {
    const r = await cli(['build-base', '--tag', TAG], {env: HOST_ENV})
    expect(r.exitCode, r.stderr.slice(-3000)).toBe(0)
    expect(r.stderr.split('\n')[0]).toBe(`trusting the CA certificates in ${HOST_BUNDLE} (NODE_EXTRA_CA_CERTS); --ca-cert overrides`)
    expect(r.stdout.trim()).toMatch(new RegExp(`^agent-sandbox-base:${TAG} \\(claude-code `))
    const label = await docker('image', 'inspect', '--format', '{{index .Config.Labels "dev.agent-sandbox.ca-certs"}}', `agent-sandbox-base:${TAG}`)
    expect(label.stdout.trim()).toBe(caCertsDigest(readCaCerts([HOST_BUNDLE])))
    // The image's own tools trust the proxy: npm, as the agent's user, reads the registry through it.
    const npm = await docker('run', '--rm', '--entrypoint', '/bin/sh', '--user', 'node', `agent-sandbox-base:${TAG}`, '-c', 'npm view valibot name')
    expect(npm.exitCode, npm.stderr).toBe(0)
    expect(npm.stdout.trim()).toBe('valibot')
  })

  it('a build whose image lacks the proxy CA ends with one line naming the problem and --ca-cert', async () => {
    const ws = await makeWorkspace('proxy-ca')
    created.push(ws)
    await initWorkspace(ws, ['--base-tag', TAG])
    // The image's trust store without the certificates build-base added: Debian's own roots only.
    writeFileSync(
      join(ws, '.agent-sandbox', 'Dockerfile'),
      [
        'ARG BASE_IMAGE_TAG=latest',
        'FROM agent-sandbox-base:${BASE_IMAGE_TAG}',
        'USER root',
        'RUN rm -f /usr/local/share/ca-certificates/agent-sandbox/*.crt && update-ca-certificates --fresh >/dev/null 2>&1 && npm view valibot name',
        '',
      ].join('\n'),
    )
    await trustWorkspace(ws)

    const r = await cli(['build', ws, '--base-tag', TAG], {env: HOST_ENV})
    expect(r.exitCode, r.stderr.slice(-3000)).toBe(5)
    expect(r.stderr).toContain(`agent-sandbox-base:${TAG} trusts the CA certificates in ${HOST_BUNDLE} (NODE_EXTRA_CA_CERTS)`)
    expect(lastLine(r.stderr)).toMatch(
      new RegExp(
        `^agent-sandbox: error: building agent-sandbox-proxy-ca-\\S+ failed: a download did not trust a TLS certificate \\((SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|UNABLE_TO_VERIFY_LEAF_SIGNATURE)\\), as behind a TLS-inspecting proxy \\(hint: give the proxy's CA certificate to the image: agent-sandbox build-base --tag ${TAG} --ca-cert /path/to/proxy-ca.pem\\)$`,
      ),
    )

    // Control: the same image with its trust store left alone builds.
    writeFileSync(join(ws, '.agent-sandbox', 'Dockerfile'), 'ARG BASE_IMAGE_TAG=latest\nFROM agent-sandbox-base:${BASE_IMAGE_TAG}\nUSER root\nRUN npm view valibot name\n')
    await trustWorkspace(ws)
    const ok = await cli(['build', ws, '--base-tag', TAG], {env: HOST_ENV})
    expect(ok.exitCode, ok.stderr.slice(-3000)).toBe(0)
  })

  it('build says when the base image does not trust the bundle the host names', async () => {
    const ws = await makeWorkspace('other-ca')
    created.push(ws)
    await initWorkspace(ws, ['--base-tag', TAG])
    const other = join(ws, '..', 'other-ca.pem')
    writeFileSync(other, '-----BEGIN CERTIFICATE-----\nTm90IHRoZSBwcm94eQ==\n-----END CERTIFICATE-----\n')
    const r = await cli(['build', ws, '--base-tag', TAG, '--no-cache'], {env: {...HOST_ENV, NODE_EXTRA_CA_CERTS: other}})
    expect(r.exitCode, r.stderr.slice(-3000)).toBe(0)
    expect(r.stderr).toContain(
      `agent-sandbox-base:${TAG} was not built to trust the CA certificates in ${other} (NODE_EXTRA_CA_CERTS); if a step fails on a certificate: agent-sandbox build-base --tag ${TAG}`,
    )
  })
})
