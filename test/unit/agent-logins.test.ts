/** The agents' logins: surrogates of the same shape, the swap both ways at the token endpoints, the credential files as the volume gets them. */
import {mkdtempSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterAll, describe, expect, it} from 'vitest'
import {
  addMinted,
  isJwt,
  loginSecrets,
  maskTokenResponse,
  maskVendorKeys,
  mintLoginSurrogate,
  swapRequestBody,
  tokenEndpoint,
  type AgentLogin,
} from '../../src/lib/network/gateway/agent-logins.js'
import {swapSecrets} from '../../src/lib/network/gateway/secrets.js'
import {maskCredentialFile} from '../../src/lib/agents/login-files.js'
import {loginStoreDir, readLoginStore, storeLogins} from '../../src/lib/logins/login-store.js'

const KEY = 'a'.repeat(64)
const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url')
const JWT = `${b64({alg: 'RS256', typ: 'JWT', kid: 'k1'})}.${b64({exp: 1_900_000_000, email: 'dev@example.com', 'https://api.openai.com/auth': {chatgpt_account_id: 'acc-1'}})}.${'S'.repeat(342)}`
const ACCESS = `sk-ant-oat01-${'Q'.repeat(86)}-AAAAAA`
const REFRESH = `sk-ant-ort01-${'R'.repeat(86)}-BBBBBB`
const OPAQUE = `rt_${'x'.repeat(40)}.${'y'.repeat(20)}`

describe('login surrogates', () => {
  it('keep an OAuth token\'s prefix, length and punctuation, and differ from it; the same under the same key, not under another', () => {
    for (const value of [ACCESS, REFRESH, OPAQUE, `sk-proj-${'k'.repeat(120)}`]) {
      const s = mintLoginSurrogate('n', value, KEY)
      expect(s).not.toBe(value)
      expect(s).toHaveLength(value.length)
      expect(s.replace(/[A-Za-z0-9]/g, 'x')).toBe(value.replace(/[A-Za-z0-9]/g, 'x'))
      expect(s).toBe(mintLoginSurrogate('n', value, KEY))
      expect(s).not.toBe(mintLoginSurrogate('n', value, 'b'.repeat(64)))
    }
    expect(mintLoginSurrogate('n', ACCESS, KEY).startsWith('sk-ant-oat01-')).toBe(true)
    expect(mintLoginSurrogate('n', REFRESH, KEY).startsWith('sk-ant-ort01-')).toBe(true)
  })

  it('keep a JWT\'s header and claims (decodable, exp and all) with a signature of the same length that is not its own', () => {
    expect(isJwt(JWT)).toBe(true)
    expect(isJwt('a.b.c')).toBe(false)
    expect(isJwt(ACCESS)).toBe(false)
    const s = mintLoginSurrogate('id_token', JWT, KEY)
    const [h, c, sig] = s.split('.')
    expect(`${h}.${c}`).toBe(JWT.split('.').slice(0, 2).join('.'))
    expect(JSON.parse(Buffer.from(c, 'base64url').toString()).exp).toBe(1_900_000_000)
    expect(sig).toHaveLength(342)
    expect(sig).toMatch(/^[A-Za-z0-9_-]+$/)
    expect(sig).not.toBe('S'.repeat(342))
  })
})

describe('the token endpoints', () => {
  it('are POSTs to the documented paths of the vendors\' hosts, the query aside; nothing else is one', () => {
    expect(tokenEndpoint('platform.claude.com', 'POST', '/v1/oauth/token')?.vendor).toBe('anthropic')
    expect(tokenEndpoint('auth.openai.com', 'post', '/oauth/token?x=1')?.vendor).toBe('openai')
    expect(tokenEndpoint('api.anthropic.com', 'POST', '/api/oauth/claude_cli/create_api_key')?.vendor).toBe('anthropic')
    expect(tokenEndpoint('auth.openai.com', 'GET', '/oauth/token')).toBeUndefined()
    expect(tokenEndpoint('evil.example', 'POST', '/oauth/token')).toBeUndefined()
    expect(tokenEndpoint('auth.openai.com', 'POST', '/oauth/token/x')).toBeUndefined()
  })
})

const login = (name: string, vendor: AgentLogin['vendor'], value: string): AgentLogin => ({name, vendor, value, surrogate: mintLoginSurrogate(name, value, KEY)})
const claudeLogins = [login('claude accessToken', 'anthropic', ACCESS), login('claude refreshToken', 'anthropic', REFRESH)]
const codexLogins = [login('codex refresh_token', 'openai', OPAQUE), login('codex id_token', 'openai', JWT)]

describe('the request side', () => {
  it('swaps surrogates in a refresh grant, JSON or form-encoded, naming what it swapped', () => {
    const json = JSON.stringify({grant_type: 'refresh_token', refresh_token: claudeLogins[1].surrogate, client_id: 'c'})
    const swapped = swapRequestBody('anthropic', json, claudeLogins)
    expect(swapped).toEqual({ok: true, body: JSON.stringify({grant_type: 'refresh_token', refresh_token: REFRESH, client_id: 'c'}), swapped: ['claude refreshToken']})
    const form = `grant_type=refresh_token&refresh_token=${encodeURIComponent(codexLogins[0].surrogate)}&client_id=app`
    const f = swapRequestBody('openai', form, codexLogins)
    expect(f.ok && f.body).toBe(`grant_type=refresh_token&refresh_token=${encodeURIComponent(OPAQUE)}&client_id=app`)
  })

  it('refuses another vendor\'s surrogate at a token endpoint, and passes a body without surrogates unchanged', () => {
    expect(swapRequestBody('openai', `{"refresh_token":"${claudeLogins[1].surrogate}"}`, [...claudeLogins, ...codexLogins])).toEqual({
      ok: false,
      rule: "login claude refreshToken is not for openai's token endpoint",
    })
    expect(swapRequestBody('openai', '{"code":"abc"}', codexLogins)).toEqual({ok: true, body: '{"code":"abc"}', swapped: []})
  })

  it('in headers: swapped at the vendor\'s hosts over TLS; refused at any other host, naming the credential', () => {
    const secrets = loginSecrets(claudeLogins)
    const headers: Array<[string, string]> = [['authorization', `Bearer ${claudeLogins[0].surrogate}`]]
    expect(swapSecrets('api.anthropic.com', true, '/v1/messages', headers, secrets)).toEqual({ok: true, headers: [['authorization', `Bearer ${ACCESS}`]], swapped: ['claude accessToken']})
    const elsewhere = swapSecrets('api.github.com', true, '/', headers, secrets)
    expect(elsewhere.ok).toBe(false)
    expect(!elsewhere.ok && elsewhere.rule).toContain('claude accessToken is not for api.github.com')
    expect(swapSecrets('api.anthropic.com', false, '/', headers, secrets).ok).toBe(false)
  })
})

describe('the answer side', () => {
  it('puts fresh surrogates in place of new tokens (JWTs as JWTs) and returns them with their values', () => {
    const newAccess = `sk-ant-oat01-${'N'.repeat(86)}-CCCCCC`
    const body = JSON.stringify({token_type: 'Bearer', access_token: newAccess, refresh_token: REFRESH, expires_in: 28800, scope: 'user:inference'})
    const r = maskTokenResponse('anthropic', 200, body, claudeLogins, KEY, 'claude')
    expect(r.ok).toBe(true)
    if (!r.ok) return
    const out = JSON.parse(r.body) as Record<string, unknown>
    expect(out.token_type).toBe('Bearer')
    expect(out.expires_in).toBe(28800)
    expect(out.refresh_token).toBe(claudeLogins[1].surrogate) // a known value: its own surrogate
    expect(out.access_token).toBe(mintLoginSurrogate('claude access_token', newAccess, KEY))
    expect(r.minted).toEqual([{name: 'claude access_token', vendor: 'anthropic', value: newAccess, surrogate: out.access_token}])
    expect(r.body).not.toContain(newAccess)
    expect(r.body).not.toContain(REFRESH)
  })

  it('masks Codex\'s id_token, access_token and an API key from a token exchange; keeps ids and dates', () => {
    const body = JSON.stringify({id_token: JWT, access_token: `${b64({alg: 'RS256', kid: 'k2'})}.${b64({exp: 1})}.${'T'.repeat(342)}`, refresh_token: `rt_${'z'.repeat(50)}`, account_id: '11111111-2222-3333-4444-555555555555'})
    const r = maskTokenResponse('openai', 200, body, [], KEY, 'codex')
    expect(r.ok && r.minted.map((m) => m.name).sort()).toEqual(['codex access_token', 'codex id_token', 'codex refresh_token'])
    if (!r.ok) return
    const out = JSON.parse(r.body) as Record<string, string>
    expect(isJwt(out.id_token)).toBe(true)
    expect(out.account_id).toBe('11111111-2222-3333-4444-555555555555')
    const key = maskTokenResponse('openai', 200, JSON.stringify({access_token: `sk-proj-${'p'.repeat(100)}`}), [], KEY, 'codex')
    expect(key.ok && key.body).not.toContain('p'.repeat(100))
    const raw = maskTokenResponse('anthropic', 200, JSON.stringify({raw_key: `sk-ant-api03-${'r'.repeat(90)}`, nested: [{api_key: `k-${'q'.repeat(40)}`}]}), [], KEY, 'claude')
    expect(raw.ok && raw.minted).toHaveLength(2)
  })

  it('fails closed: a successful answer that is not JSON is refused; an error answer without a token passes; one echoing a token is refused', () => {
    expect(maskTokenResponse('openai', 200, `access_token=${OPAQUE}`, codexLogins, KEY, 'codex').ok).toBe(false)
    expect(maskTokenResponse('openai', 400, 'bad request', codexLogins, KEY, 'codex')).toEqual({ok: true, body: 'bad request', minted: []})
    expect(maskTokenResponse('openai', 500, `oops ${OPAQUE}`, codexLogins, KEY, 'codex').ok).toBe(false)
    expect(maskTokenResponse('anthropic', 401, '{"error":"invalid_grant","error_description":"Refresh token not found or invalid"}', claudeLogins, KEY, 'claude')).toMatchObject({ok: true, minted: []})
  })

  it('keeps at most a few logins per name, newest first, without duplicates', () => {
    const many = Array.from({length: 6}, (_, i) => login('codex access_token', 'openai', `tok-${String(i).repeat(30)}`))
    const kept = addMinted(many.slice(1), [many[0], many[1]], 4)
    expect(kept.map((l) => l.value)).toEqual(many.slice(0, 4).map((l) => l.value))
  })
})

describe('the vendors\' API key variables', () => {
  it('are masked for their vendor\'s hosts when handed in plain; other names and masked entries stay as they are', () => {
    const out = maskVendorKeys(['ANTHROPIC_API_KEY', 'OPENAI_API_KEY', 'OTHER', 'toString', {name: 'X', hosts: ['x.org']}])
    expect(out[0]).toEqual({name: 'ANTHROPIC_API_KEY', hosts: ['api.anthropic.com', 'platform.claude.com', 'console.anthropic.com', 'claude.ai', 'mcp-proxy.anthropic.com']})
    expect(out[1]).toMatchObject({name: 'OPENAI_API_KEY', hosts: expect.arrayContaining(['api.openai.com', 'chatgpt.com'])})
    expect(out.slice(2)).toEqual(['OTHER', 'toString', {name: 'X', hosts: ['x.org']}])
  })
})

describe('credential files and the host\'s store', () => {
  const state = mkdtempSync(join(tmpdir(), 'logins-'))
  const env = {XDG_STATE_HOME: state}
  afterAll(() => rmSync(state, {recursive: true, force: true}))

  it('a Claude Code .credentials.json keeps its shape with surrogates for both tokens', () => {
    const file = {claudeAiOauth: {accessToken: ACCESS, refreshToken: REFRESH, expiresAt: 1_900_000_000_000, scopes: ['user:inference', 'user:profile'], subscriptionType: 'max'}}
    const r = maskCredentialFile('claude', '.credentials.json', Buffer.from(JSON.stringify(file)), KEY, '/h/.claude/.credentials.json')
    const out = JSON.parse(r.content.toString()) as typeof file
    expect(out.claudeAiOauth.expiresAt).toBe(1_900_000_000_000)
    expect(out.claudeAiOauth.scopes).toEqual(file.claudeAiOauth.scopes)
    expect(out.claudeAiOauth.accessToken).toMatch(/^sk-ant-oat01-/)
    expect(out.claudeAiOauth.accessToken).not.toBe(ACCESS)
    expect(r.content.toString()).not.toContain(REFRESH)
    expect(r.logins.map((l) => l.name).sort()).toEqual(['claude .credentials.json accessToken', 'claude .credentials.json refreshToken'])
  })

  it('a Codex auth.json: every token and the API key masked, account_id and last_refresh kept; a file that is not JSON is refused', () => {
    const file = {OPENAI_API_KEY: null, tokens: {id_token: JWT, access_token: JWT, refresh_token: OPAQUE, account_id: 'acc-1'}, last_refresh: '2026-11-28T10:00:00Z'}
    const r = maskCredentialFile('codex', 'auth.json', Buffer.from(JSON.stringify(file)), KEY, '/h/.codex/auth.json')
    const out = JSON.parse(r.content.toString()) as typeof file
    expect(out.tokens.account_id).toBe('acc-1')
    expect(out.last_refresh).toBe(file.last_refresh)
    expect(out.OPENAI_API_KEY).toBeNull()
    expect(r.content.toString()).not.toContain(OPAQUE)
    expect(r.content.toString()).not.toContain(JWT)
    expect(() => maskCredentialFile('codex', 'auth.json', Buffer.from('not json'), KEY, '/h/.codex/auth.json')).toThrow(/cannot mask \/h\/.codex\/auth.json/)
  })

  it('stores the real values 0600 in a 0700 directory, adding minted ones in front', () => {
    storeLogins('vol-a', KEY, claudeLogins, env)
    const minted = login('claude access_token', 'anthropic', `sk-ant-oat01-${'M'.repeat(92)}`)
    storeLogins('vol-a', KEY, [minted], env)
    expect(readLoginStore('vol-a', env)?.logins.map((l) => l.name)).toEqual(['claude access_token', 'claude accessToken', 'claude refreshToken'])
    expect(statSync(join(loginStoreDir(env), 'vol-a.json')).mode & 0o777).toBe(0o600)
    expect(statSync(loginStoreDir(env)).mode & 0o777).toBe(0o700)
    expect(readLoginStore('vol-b', env)).toBeUndefined()
  })
})
