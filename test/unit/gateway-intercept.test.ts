/** The gateway's pure parts: httpRules decisions and merging, the per-sandbox CA and its leaf certificates, masked secrets. */
import {execFileSync} from 'node:child_process'
import {createPrivateKey, X509Certificate} from 'node:crypto'
import {once} from 'node:events'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import type {AddressInfo} from 'node:net'
import {connect, createServer} from 'node:tls'
import {afterAll, describe, expect, it, vi} from 'vitest'
import {judgeHttpRules, DEFAULT_HTTP_RULES, isHttpRule, layerWithRule, mergeHttpRules, normaliseRequestPath, parseRuleLines, planRuleAdd, rulesFor, rulesLoosen} from '../../src/lib/network/gateway/rules.js'
import {makeSurrogate, swapSecrets, type MaskedSecret} from '../../src/lib/network/gateway/secrets.js'
import {createCa, createLeafMinter} from '../../src/lib/network/gateway/certificates.js'

describe('httpRules', () => {
  const rules = [
    {host: 'registry.npmjs.org', methods: ['GET', 'HEAD']},
    {host: 'github.com', paths: ['/myorg/myrepo.git/*', '/myorg/myrepo/*']},
    {host: '*.example.com', methods: ['GET'], paths: ['/pub/*']},
    {host: 'open.example.org'},
  ]

  it('lets a host without restricting rules through untouched (pass-through)', () => {
    expect(rulesFor('other.org', rules)).toEqual([])
    expect(rulesFor('open.example.org', rules)).toEqual([])
    expect(judgeHttpRules('other.org', 'DELETE', '/x', rules)).toEqual({allowed: true})
  })

  it('refuses a method or a path outside the rules, naming the rule; admits the twin', () => {
    expect(judgeHttpRules('registry.npmjs.org', 'GET', '/left-pad', rules)).toEqual({allowed: true, rule: 'httpRules registry.npmjs.org methods GET,HEAD'})
    expect(judgeHttpRules('registry.npmjs.org', 'PUT', '/left-pad', rules)).toEqual({allowed: false, rule: 'method PUT not in httpRules registry.npmjs.org methods GET,HEAD'})
    expect(judgeHttpRules('github.com', 'POST', '/myorg/myrepo.git/git-receive-pack', rules).allowed).toBe(true)
    expect(judgeHttpRules('github.com', 'GET', '/other/repo.git/info/refs', rules)).toEqual({
      allowed: false,
      rule: 'path /other/repo.git/info/refs not in httpRules github.com paths /myorg/myrepo.git/*,/myorg/myrepo/*',
    })
    expect(judgeHttpRules('a.example.com', 'GET', '/pub/x', rules).allowed).toBe(true)
    expect(judgeHttpRules('example.com', 'POST', '/pub/x', rules).allowed).toBe(true) // *.x covers subdomains only
    expect(judgeHttpRules('a.example.com', 'POST', '/pub/x', rules).allowed).toBe(false)
  })

  it('judges the path with dot segments resolved, so ../ cannot climb out of an allowed prefix', () => {
    const judged = normaliseRequestPath('/myorg/myrepo/../../other/repo?x=1')
    expect(judged).toEqual({path: '/other/repo', search: '?x=1'})
    expect(normaliseRequestPath('/myorg/myrepo/%2e%2e/%2E%2E/other')?.path).toBe('/other')
    expect(judgeHttpRules('github.com', 'GET', judged?.path ?? '', rules).allowed).toBe(false)
    expect(normaliseRequestPath('http://x/y')).toBeUndefined()
  })

  it('merges per host: a layer that names a host replaces its rules, others are kept', () => {
    const merged = mergeHttpRules(DEFAULT_HTTP_RULES, [{host: 'registry.npmjs.org'}, {host: 'api.example.com', methods: ['GET']}])
    expect(merged).toEqual([{host: 'registry.npmjs.org'}, {host: 'api.example.com', methods: ['GET']}])
    expect(rulesFor('registry.npmjs.org', merged)).toEqual([])
    expect(mergeHttpRules(DEFAULT_HTTP_RULES, [{host: 'a.org', methods: ['GET']}])).toHaveLength(2)
  })

  it('classifies a layer: new restrictions narrow, replacing a restricted host\'s rules loosens unless identical', () => {
    expect(rulesLoosen(DEFAULT_HTTP_RULES, [{host: 'api.example.com', methods: ['GET']}])).toEqual([])
    expect(rulesLoosen(DEFAULT_HTTP_RULES, [{host: 'registry.npmjs.org'}])).toEqual(['registry.npmjs.org'])
    expect(rulesLoosen(DEFAULT_HTTP_RULES, [{host: 'registry.npmjs.org', methods: ['GET', 'HEAD', 'PUT']}])).toEqual(['registry.npmjs.org'])
    expect(rulesLoosen(DEFAULT_HTTP_RULES, [{host: 'Registry.npmjs.org', methods: ['HEAD', 'GET']}])).toEqual([])
  })
})

describe('live httpRules (firewall allow --methods/--paths)', () => {
  const put = {host: 'registry.npmjs.org', methods: ['PUT'], paths: ['/@myorg/*']}

  it('adds beside the rules of a restricted host (the union admits both), never narrows an unrestricted one', () => {
    expect(planRuleAdd(DEFAULT_HTTP_RULES, put, false)).toBe('add')
    const after = [...DEFAULT_HTTP_RULES, put]
    expect(judgeHttpRules('registry.npmjs.org', 'PUT', '/@myorg/pkg', after).allowed).toBe(true)
    expect(judgeHttpRules('registry.npmjs.org', 'PUT', '/other', after).allowed).toBe(false)
    expect(judgeHttpRules('registry.npmjs.org', 'GET', '/other', after).allowed).toBe(true)
    expect(planRuleAdd(after, {...put, host: 'Registry.npmjs.org'}, false)).toBe('present')
    expect(planRuleAdd(DEFAULT_HTTP_RULES, {host: 'github.com', methods: ['GET']}, false)).toBe('unrestricted')
    expect(planRuleAdd(DEFAULT_HTTP_RULES, {host: 'new.example', methods: ['GET']}, true)).toBe('add')
    // a wildcard rule restricts its subdomains: a rule for one of them is added beside it
    expect(planRuleAdd([{host: '*.example.com', methods: ['GET']}], {host: 'api.example.com', methods: ['POST']}, false)).toBe('add')
  })

  it('writes a workspace layer that keeps what was in force below for the host, plus the rule', () => {
    expect(layerWithRule([], DEFAULT_HTTP_RULES, put)).toEqual([...DEFAULT_HTTP_RULES, put])
    expect(layerWithRule([{host: 'registry.npmjs.org', methods: ['GET']}], DEFAULT_HTTP_RULES, put)).toEqual([{host: 'registry.npmjs.org', methods: ['GET']}, put])
    expect(layerWithRule([put], DEFAULT_HTTP_RULES, put)).toEqual([put])
  })

  it('the gateway takes only well-formed rules, one JSON line each; torn or bad lines are skipped', () => {
    expect(isHttpRule(put)).toBe(true)
    for (const bad of [{host: 'x.org'}, {host: 'x.org', methods: ['get']}, {host: 'x.org', paths: ['nope']}, {host: 'x.org', methods: []}, {host: 'a b', methods: ['GET']}, {host: 'x.org', methods: ['GET'], extra: 1}, null]) {
      expect(isHttpRule(bad), JSON.stringify(bad)).toBe(false)
    }
    expect(parseRuleLines(`${JSON.stringify(put)}\n{"host":"x.org","methods":["get"]}\n{"host":"y.org","meth`)).toEqual([put])
  })
})

describe('the per-sandbox CA', () => {
  it('mints leaf certificates that a client trusting only the CA verifies, for the name asked and no other', async () => {
    const ca = createCa('asbx-test')
    expect(ca.cert).toMatch(/^-----BEGIN CERTIFICATE-----\n/)
    expect(ca.key).toMatch(/^-----BEGIN PRIVATE KEY-----\n/)
    const minter = createLeafMinter(ca)
    const leaf = await minter.leaf('a.test')
    expect(await minter.leaf('a.test')).toBe(leaf) // cached
    const server = createServer({cert: leaf.cert, key: leaf.key}, (s) => s.end('ok'))
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const port = (server.address() as AddressInfo).port
    const dial = (servername: string, ca?: string) =>
      new Promise<string>((resolve) => {
        const c = connect({port, host: '127.0.0.1', servername, ...(ca ? {ca} : {})}, () => c.once('data', (d: Buffer) => resolve(`ok ${String(d)}`)))
        c.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message))
      })
    try {
      expect(await dial('a.test', ca.cert)).toBe('ok ok')
      expect(await dial('b.test', ca.cert)).toBe('ERR_TLS_CERT_ALTNAME_INVALID')
      expect(await dial('a.test')).toMatch(/UNABLE_TO_VERIFY|SELF_SIGNED|UNABLE_TO_GET_ISSUER/) // not trusted without the CA
      const other = createCa('other')
      expect(await dial('a.test', other.cert)).not.toBe('ok ok')
    } finally {
      server.close()
    }
  })
})

describe('the CA and leaves as written (DER with node crypto), checked by OpenSSL', () => {
  const dir = mkdtempSync(join(tmpdir(), 'asbx-ca-'))
  afterAll(() => rmSync(dir, {recursive: true, force: true}))
  const openssl = (...args: string[]) => execFileSync('openssl', args, {encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']})

  it('makes a self-signed CA for one level, for signing only, with its key, valid from a day ago for ten years', () => {
    const ca = createCa('agent-sandbox box, x')
    const cert = new X509Certificate(ca.cert)
    expect(cert.ca).toBe(true)
    expect(cert.subject).toBe('CN=agent-sandbox box\\, x\nO=agent-sandbox')
    expect(cert.issuer).toBe(cert.subject)
    expect(cert.verify(cert.publicKey)).toBe(true)
    expect(cert.checkPrivateKey(createPrivateKey(ca.key))).toBe(true)
    const day = 24 * 60 * 60 * 1000
    expect(Math.abs(Date.parse(cert.validFrom) - (Date.now() - day))).toBeLessThan(60_000)
    expect(Math.abs(Date.parse(cert.validTo) - (Date.now() + 3650 * day))).toBeLessThan(60_000)
    writeFileSync(join(dir, 'ca.pem'), ca.cert)
    const text = openssl('x509', '-in', join(dir, 'ca.pem'), '-noout', '-text')
    expect(text).toMatch(/Basic Constraints: critical\s+CA:TRUE, pathlen:0/)
    expect(text).toMatch(/Key Usage: critical\s+Certificate Sign, CRL Sign\n/)
    expect(text).toMatch(/Subject Key Identifier:\s+[0-9A-F:]{59}/)
    expect(text).toMatch(/Signature Algorithm: ecdsa-with-SHA256/)
    expect(text).toMatch(/ASN1 OID: prime256v1/)
    // Each CA is its own: another key, another serial.
    const other = new X509Certificate(createCa('agent-sandbox box, x').cert)
    expect(other.serialNumber).not.toBe(cert.serialNumber)
    expect(other.publicKey.export({type: 'spki', format: 'der'}).equals(cert.publicKey.export({type: 'spki', format: 'der'}))).toBe(false)
  })

  it('passes openssl verify -x509_strict: the CA and a leaf it issued, for that leaf\'s name; a leaf of another CA does not', async () => {
    const ca = createCa('strict')
    const leaf = await createLeafMinter(ca).leaf('api.example.test')
    writeFileSync(join(dir, 'strict-ca.pem'), ca.cert)
    // The leaf's file holds the leaf, then the CA: its first certificate is the one verified.
    writeFileSync(join(dir, 'leaf.pem'), leaf.cert.split(/(?<=-----END CERTIFICATE-----\n)/)[0] as string)
    expect(openssl('verify', '-x509_strict', '-purpose', 'sslserver', '-verify_hostname', 'api.example.test', '-CAfile', join(dir, 'strict-ca.pem'), join(dir, 'leaf.pem')).trim()).toBe(`${join(dir, 'leaf.pem')}: OK`)
    let refused = ''
    try {
      openssl('verify', '-x509_strict', '-verify_hostname', 'other.test', '-CAfile', join(dir, 'strict-ca.pem'), join(dir, 'leaf.pem'))
    } catch (error) {
      refused = String((error as {stderr?: string}).stderr)
    }
    expect(refused).toMatch(/hostname mismatch/)
    writeFileSync(join(dir, 'other-ca.pem'), createCa('other').cert)
    expect(() => openssl('verify', '-x509_strict', '-CAfile', join(dir, 'other-ca.pem'), join(dir, 'leaf.pem'))).toThrow()
  })

  it('writes dates from 2050 on as GeneralizedTime, as RFC 5280 asks (a CA made in 2045 runs to 2055)', () => {
    vi.useFakeTimers({now: Date.parse('2045-06-01T00:00:00Z'), toFake: ['Date']})
    try {
      const ca = createCa('late')
      writeFileSync(join(dir, 'late.pem'), ca.cert)
      expect(openssl('x509', '-in', join(dir, 'late.pem'), '-noout', '-enddate').trim()).toMatch(/^notAfter=May 30 00:00:00 2055 GMT$/)
      expect(new X509Certificate(ca.cert).validTo).toMatch(/2055/)
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('masked secrets', () => {
  const secret = (over: Partial<MaskedSecret> = {}): MaskedSecret => ({name: 'API_TOKEN', hosts: ['api.example.com'], surrogate: 'sk-SURROGATE0123456789', value: 'sk-REALVALUE98765432100', ...over})

  it('makes a surrogate of the same shape: prefix, length and punctuation kept, different per key, the same for the same key', () => {
    for (const value of ['sk-proj-abcdEFGH1234ijklMNOP5678', 'ghp_0123456789abcdefABCDEF0123456789abcd', 'ghs_xyz.ABC-123_def', 'plainvalue1234']) {
      const a = makeSurrogate('T', value, 'key-a')
      expect(a).toHaveLength(value.length)
      expect(a).not.toBe(value)
      expect(a.replace(/[A-Za-z0-9]/g, 'x')).toBe(value.replace(/[A-Za-z0-9]/g, 'x'))
      expect(makeSurrogate('T', value, 'key-a')).toBe(a)
      expect(makeSurrogate('T', value, 'key-b')).not.toBe(a)
    }
    expect(makeSurrogate('T', 'sk-proj-abcdEFGH1234ijklMNOP5678', 'k').startsWith('sk-proj-')).toBe(true)
    expect(makeSurrogate('T', 'ghp_0123456789abcdefABCDEF0123456789abcd', 'k').startsWith('ghp_')).toBe(true)
  })

  it('swaps the surrogate for the value in headers, Basic auth included, for the declared host over TLS only', () => {
    const s = secret()
    const ok = swapSecrets('api.example.com', true, '/v1', [['Authorization', `Bearer ${s.surrogate}`], ['X-Other', 'keep']], [s])
    expect(ok).toEqual({ok: true, headers: [['Authorization', `Bearer ${s.value}`], ['X-Other', 'keep']], swapped: ['API_TOKEN']})
    const basic = swapSecrets('api.example.com', true, '/', [['authorization', `Basic ${Buffer.from(`me:${s.surrogate}`).toString('base64')}`]], [s])
    expect(basic).toEqual({ok: true, headers: [['authorization', `Basic ${Buffer.from(`me:${s.value}`).toString('base64')}`]], swapped: ['API_TOKEN']})
    expect(swapSecrets('api.example.com', true, '/', [['Accept', '*/*']], [s])).toEqual({ok: true, headers: [['Accept', '*/*']], swapped: []})
  })

  it('refuses a surrogate sent to another host, over plain HTTP, or in the request target', () => {
    const s = secret()
    expect(swapSecrets('other.example.com', true, '/', [['Authorization', `Bearer ${s.surrogate}`]], [s])).toEqual({
      ok: false,
      rule: 'secret API_TOKEN is not for other.example.com (declared for api.example.com)',
    })
    const basic = swapSecrets('other.example.com', true, '/', [['Authorization', `Basic ${Buffer.from(`x:${s.surrogate}`).toString('base64')}`]], [s])
    expect(basic.ok).toBe(false)
    expect(swapSecrets('api.example.com', false, '/', [['Authorization', `Bearer ${s.surrogate}`]], [s])).toEqual({ok: false, rule: 'secret API_TOKEN in header Authorization only over HTTPS'})
    expect(swapSecrets('api.example.com', true, `/?key=${s.surrogate}`, [], [s])).toEqual({ok: false, rule: 'secret API_TOKEN in the request target'})
  })

  it('a gateway made anew without the value still knows the surrogate: refused at other hosts, and at the declared host too (never passed on)', () => {
    const {value: _value, ...held} = secret()
    expect(swapSecrets('other.example.com', true, '/', [['Authorization', `Bearer ${held.surrogate}`]], [held])).toEqual({
      ok: false,
      rule: 'secret API_TOKEN is not for other.example.com (declared for api.example.com)',
    })
    expect(swapSecrets('api.example.com', true, '/', [['Authorization', `Bearer ${held.surrogate}`]], [held])).toEqual({
      ok: false,
      rule: 'secret API_TOKEN has no value in this gateway (made anew where API_TOKEN was not set)',
    })
    // control: a request without the surrogate passes as it is
    expect(swapSecrets('api.example.com', true, '/', [['Accept', '*/*']], [held])).toEqual({ok: true, headers: [['Accept', '*/*']], swapped: []})
  })
})
