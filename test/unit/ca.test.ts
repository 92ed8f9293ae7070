/** Which CA certificates an image build trusts, and how a build that fails on one says so. */
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {caCertsDigest, certificateProblem, chooseCaCerts, readChosenCaCerts} from '../../src/lib/images/ca.js'
import {buildFailure} from '../../src/lib/images/build.js'
import {BuildError, UsageError} from '../../src/lib/errors.js'

const pem = (body: string) => `-----BEGIN CERTIFICATE-----\n${body}\n-----END CERTIFICATE-----\n`

describe('chooseCaCerts', () => {
  it('uses the bundle the host names for its tools when nothing names one for the build', () => {
    expect(chooseCaCerts(undefined, {NODE_EXTRA_CA_CERTS: '/etc/proxy.pem'})).toEqual({paths: ['/etc/proxy.pem'], source: 'NODE_EXTRA_CA_CERTS', fromHost: true})
    expect(chooseCaCerts([], {SSL_CERT_FILE: '/etc/ssl/all.pem'})).toEqual({paths: ['/etc/ssl/all.pem'], source: 'SSL_CERT_FILE', fromHost: true})
  })

  it('takes both host variables, once each', () => {
    expect(chooseCaCerts(undefined, {NODE_EXTRA_CA_CERTS: '/a.pem', SSL_CERT_FILE: '/b.pem'})).toEqual({
      paths: ['/a.pem', '/b.pem'],
      source: 'NODE_EXTRA_CA_CERTS, SSL_CERT_FILE',
      fromHost: true,
    })
    expect(chooseCaCerts(undefined, {NODE_EXTRA_CA_CERTS: '/a.pem', SSL_CERT_FILE: ' /a.pem '}).paths).toEqual(['/a.pem'])
  })

  it('lets --ca-cert override everything, and AGENT_SANDBOX_CA_CERTS override the host', () => {
    const env = {NODE_EXTRA_CA_CERTS: '/host.pem', SSL_CERT_FILE: '/ssl.pem', AGENT_SANDBOX_CA_CERTS: '/own.pem,/two.pem'}
    expect(chooseCaCerts(['/flag.pem'], env)).toEqual({paths: ['/flag.pem'], source: '--ca-cert', fromHost: false})
    expect(chooseCaCerts(undefined, env)).toEqual({paths: ['/own.pem', '/two.pem'], source: 'AGENT_SANDBOX_CA_CERTS', fromHost: false})
  })

  it('names nothing when the host names nothing (empty values count as unset)', () => {
    expect(chooseCaCerts(undefined, {})).toEqual({paths: [], source: '', fromHost: true})
    expect(chooseCaCerts(undefined, {NODE_EXTRA_CA_CERTS: '', SSL_CERT_FILE: '  '}).paths).toEqual([])
  })
})

describe('readChosenCaCerts', () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-sandbox-ca-'))
    writeFileSync(join(dir, 'a.pem'), pem('AAAA'))
    writeFileSync(join(dir, 'junk.pem'), 'no certificate\n')
  })
  afterAll(() => rmSync(dir, {recursive: true, force: true}))

  it("skips a host file it cannot use, and says which", () => {
    const choice = chooseCaCerts(undefined, {NODE_EXTRA_CA_CERTS: join(dir, 'a.pem'), SSL_CERT_FILE: join(dir, 'missing.pem')})
    expect(readChosenCaCerts(choice)).toEqual({certs: [pem('AAAA')], skipped: [join(dir, 'missing.pem')]})
    expect(readChosenCaCerts(chooseCaCerts(undefined, {SSL_CERT_FILE: join(dir, 'junk.pem')}))).toEqual({certs: [], skipped: [join(dir, 'junk.pem')]})
  })

  it('refuses a file named for the build that it cannot use', () => {
    expect(() => readChosenCaCerts(chooseCaCerts([join(dir, 'missing.pem')], {}))).toThrow(UsageError)
    expect(() => readChosenCaCerts(chooseCaCerts(undefined, {AGENT_SANDBOX_CA_CERTS: join(dir, 'junk.pem')}))).toThrow(/no PEM certificate/)
  })
})

describe('caCertsDigest', () => {
  it('is the same for the same set in any order, and differs for another set', () => {
    expect(caCertsDigest([pem('A'), pem('B')])).toBe(caCertsDigest([pem('B'), pem('A')]))
    expect(caCertsDigest([pem('A')])).not.toBe(caCertsDigest([pem('A'), pem('B')]))
  })
})

describe('a build that fails on a certificate', () => {
  const npmOutput = [
    'Step 9/30 : RUN npm install -g "@openai/codex@0.1.0"',
    'npm error code SELF_SIGNED_CERT_IN_CHAIN',
    'npm error errno SELF_SIGNED_CERT_IN_CHAIN',
    'npm error request to https://registry.npmjs.org/@openai%2fcodex failed, reason: self-signed certificate in certificate chain',
    "The command '/bin/sh -c npm install -g \"@openai/codex@0.1.0\"' returned a non-zero code: 1",
  ].join('\n')

  it('finds the problem in npm, apt, curl and engine output', () => {
    expect(certificateProblem(npmOutput)).toBe('SELF_SIGNED_CERT_IN_CHAIN')
    expect(certificateProblem('npm error code UNABLE_TO_GET_ISSUER_CERT_LOCALLY')).toBe('UNABLE_TO_GET_ISSUER_CERT_LOCALLY')
    expect(certificateProblem('curl: (60) SSL certificate problem: unable to get local issuer certificate')).toBe('unable to get local issuer certificate')
    expect(certificateProblem('E: Failed to fetch https://deb.example/x  Certificate verification failed: The certificate is NOT trusted.')).toBe(
      'Certificate verification failed',
    )
    expect(certificateProblem('x509: certificate signed by unknown authority')).toBe('x509: certificate signed by unknown authority')
  })

  it('controls: other failures are not taken for one', () => {
    expect(certificateProblem("npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nope")).toBeUndefined()
    expect(certificateProblem('E: Unable to locate package nope')).toBeUndefined()
  })

  it('ends with one line naming the problem and --ca-cert', () => {
    const error = buildFailure('agent-sandbox-base:t', npmOutput, {command: 'agent-sandbox build-base', tag: 't'})
    expect(error).toBeInstanceOf(BuildError)
    expect(error.message).toBe('building agent-sandbox-base:t failed: a download did not trust a TLS certificate (SELF_SIGNED_CERT_IN_CHAIN), as behind a TLS-inspecting proxy')
    expect(error.hint).toBe("give the proxy's CA certificate to the image: agent-sandbox build-base --tag t --ca-cert /path/to/proxy-ca.pem")
    expect(`${error.message}${error.hint}`).not.toContain('\n')
  })

  it('controls: another failure keeps the engine\'s own reason', () => {
    const error = buildFailure('img', 'Step 3/4 : RUN false\nThe command \'/bin/sh -c false\' returned a non-zero code: 1', {command: 'agent-sandbox build-base', tag: 't'})
    expect(error.message).toBe("building img failed: The command '/bin/sh -c false' returned a non-zero code: 1")
    expect(error.hint).toBe('the build output above has the details')
  })
})
