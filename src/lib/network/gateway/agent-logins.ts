/**
 * The agents' own logins (docs/agents.md, "Logins"): Claude Code's and Codex's
 * OAuth tokens and API keys live in the sandbox as surrogates of the same
 * shape; the gateway alone holds the real values. It puts them in place of the
 * surrogates in headers to the vendor's hosts (secrets.ts swapSecrets) and in
 * the bodies of the vendor's token endpoints, and in the answers of those
 * endpoints it puts fresh surrogates in place of the new real tokens. Pure.
 */
import {createHmac} from 'node:crypto'
import {makeSurrogate, type MaskedSecret, type SecretEnvEntry} from './secrets.js'
import {ruleHostMatches} from './rules.js'

export type Vendor = 'anthropic' | 'openai'

export interface AgentLogin {
  /** What logs and doctor call it: `claude .credentials.json accessToken`, `ANTHROPIC_API_KEY`. Never the value. */
  name: string
  vendor: Vendor
  surrogate: string
  value: string
}

/** What a gateway holds of a config volume's logins: the volume's surrogate key (so every sandbox of the volume mints the same surrogates) and the logins. */
export interface LoginBundle {
  key: string
  logins: AgentLogin[]
}

/** What a gateway is handed: per vendor, the bundle of the config volume of its agent (claude: anthropic, codex: openai). */
export type GatewayLogins = Partial<Record<Vendor, LoginBundle & {agent: string; volume: string}>>

/** The hosts a vendor's tokens go to (checked in the agents' code, docs/agents.md): nowhere else. */
export const VENDOR_HOSTS: Record<Vendor, readonly string[]> = {
  anthropic: ['api.anthropic.com', 'platform.claude.com', 'console.anthropic.com', 'claude.ai', 'mcp-proxy.anthropic.com'],
  openai: ['api.openai.com', 'chatgpt.com', 'auth.openai.com'],
}

/** Environment variables holding a vendor's API key: masked for its hosts even when handed in plain (`--env`, `secretEnv`). */
export const VENDOR_KEY_VARIABLES: Record<string, Vendor> = {ANTHROPIC_API_KEY: 'anthropic', OPENAI_API_KEY: 'openai'}

/** secretEnv with the vendors' API key variables masked for their hosts when given plain (`--env`, a plain entry). */
export function maskVendorKeys(entries: readonly SecretEnvEntry[]): SecretEnvEntry[] {
  return entries.map((e) => {
    const vendor = typeof e === 'string' && Object.hasOwn(VENDOR_KEY_VARIABLES, e) ? VENDOR_KEY_VARIABLES[e] : undefined
    return typeof e === 'string' && vendor ? {name: e, hosts: [...VENDOR_HOSTS[vendor]]} : e
  })
}

/**
 * The exchanges that carry a token in their body and hand out new ones in
 * their answer: the OAuth token endpoints (refresh, a login's code, Codex's
 * token exchange for an API key, Codex's revocation at logout) and Claude
 * Code's API key made from its login.
 */
export const TOKEN_ENDPOINTS: ReadonlyArray<{vendor: Vendor; host: string; path: string}> = [
  {vendor: 'anthropic', host: 'platform.claude.com', path: '/v1/oauth/token'},
  {vendor: 'anthropic', host: 'console.anthropic.com', path: '/v1/oauth/token'},
  {vendor: 'anthropic', host: 'api.anthropic.com', path: '/api/oauth/claude_cli/create_api_key'},
  {vendor: 'openai', host: 'auth.openai.com', path: '/oauth/token'},
  {vendor: 'openai', host: 'auth.openai.com', path: '/oauth/revoke'},
]

/** Bodies of token exchanges are buffered whole: anything larger is refused. */
export const MAX_EXCHANGE_BYTES = 256 * 1024

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/** A compact JWS (`header.claims.signature`) whose header decodes to JSON with an `alg`. */
export function isJwt(value: string): boolean {
  const parts = value.split('.')
  if (parts.length !== 3 || !parts.every((p) => /^[A-Za-z0-9_-]+$/.test(p))) return false
  try {
    const header = JSON.parse(Buffer.from(parts[0], 'base64url').toString('utf8')) as unknown
    return typeof header === 'object' && header !== null && 'alg' in header
  } catch {
    return false
  }
}

/**
 * A login's surrogate under the volume's `key`: for a JWT the same header and
 * claims (the agent decodes them, e.g. `exp` to know when to refresh) with a
 * signature that is not one; for any other token its prefix (`sk-ant-oat01-`),
 * length and punctuation (secrets.ts makeSurrogate). The same value gives the
 * same surrogate under the same key.
 */
export function mintLoginSurrogate(name: string, value: string, key: string): string {
  if (!isJwt(value)) return makeSurrogate(name, value, key)
  const [header, claims, signature] = value.split('.')
  let out = ''
  for (let round = 0; out.length < signature.length; round++) {
    for (const byte of createHmac('sha256', key).update(`${name}\0${value}\0${round}`).digest()) out += BASE64URL[byte % 64]
  }
  out = out.slice(0, signature.length)
  if (out === signature) out = `${out.slice(0, -1)}${out.endsWith('A') ? 'B' : 'A'}`
  return `${header}.${claims}.${out}`
}

/** The logins as the header swap takes them: each for its vendor's hosts. */
export function loginSecrets(logins: readonly AgentLogin[]): MaskedSecret[] {
  return logins.map((l) => ({name: l.name, hosts: [...VENDOR_HOSTS[l.vendor]], surrogate: l.surrogate, value: l.value}))
}

/** The token exchange a request is, if any (POST to a listed host and path, the query aside). */
export function tokenEndpoint(host: string, method: string, target: string): {vendor: Vendor; host: string; path: string} | undefined {
  if (method.toUpperCase() !== 'POST') return undefined
  const path = target.split('?')[0]
  return TOKEN_ENDPOINTS.find((e) => ruleHostMatches(e.host, host) && e.path === path)
}

export type BodySwap = {ok: true; body: string; swapped: string[]} | {ok: false; rule: string}

/** A token exchange's request body: the vendor's surrogates become real values; another vendor's surrogate refuses it. */
export function swapRequestBody(vendor: Vendor, body: string, logins: readonly AgentLogin[]): BodySwap {
  const swapped = new Set<string>()
  let out = body
  for (const l of logins) {
    if (!out.includes(l.surrogate)) continue
    if (l.vendor !== vendor) return {ok: false, rule: `login ${l.name} is not for ${vendor}'s token endpoint`}
    out = out.split(l.surrogate).join(l.value)
    swapped.add(l.name)
  }
  return {ok: true, body: out, swapped: [...swapped]}
}

export type ResponseMask = {ok: true; body: string; minted: AgentLogin[]} | {ok: false; rule: string}

/** Keys whose string values are credentials in the vendors' answers (access_token, refresh_token, id_token, raw_key, api_key). */
const CREDENTIAL_KEY = /token|key|secret|password/i
const NOT_CREDENTIAL_KEY = /^(token_type|key_type|key_id|expires|scope)/i

function looksLikeCredential(key: string, value: string): boolean {
  if (value.length < 20 || /\s/.test(value)) return false
  if (CREDENTIAL_KEY.test(key) && !NOT_CREDENTIAL_KEY.test(key)) return true
  return /^(sk-|eyJ)/.test(value)
}

/**
 * A token exchange's answer, before the agent sees it: every real value the
 * gateway knows becomes its surrogate, and every new credential (by its key or
 * its form) a fresh surrogate, returned in `minted` with its value. An answer
 * that is not JSON is passed on only when it holds no credential the gateway
 * could recognise; a successful one that is not JSON is refused (fail closed).
 */
export function maskTokenResponse(vendor: Vendor, status: number, body: string, logins: readonly AgentLogin[], surrogateKey: string, agentName: string): ResponseMask {
  let parsed: unknown
  try {
    parsed = JSON.parse(body)
  } catch {
    if (status >= 200 && status < 300) return {ok: false, rule: `${vendor}'s token endpoint answered with something other than JSON: not passed on`}
    for (const l of logins) if (body.includes(l.value)) return {ok: false, rule: `${vendor}'s token endpoint echoed login ${l.name}: not passed on`}
    return {ok: true, body, minted: []}
  }
  const minted: AgentLogin[] = []
  const known = new Map(logins.map((l) => [l.value, l.surrogate]))
  const walk = (node: unknown, key: string): unknown => {
    if (typeof node === 'string') {
      const had = known.get(node)
      if (had !== undefined) return had
      if (!looksLikeCredential(key, node)) return node
      const name = `${agentName} ${key || 'token'}`
      const login = {name, vendor, value: node, surrogate: mintLoginSurrogate(name, node, surrogateKey)}
      known.set(node, login.surrogate)
      minted.push(login)
      return login.surrogate
    }
    if (Array.isArray(node)) return node.map((n) => walk(n, key))
    if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v, k)]))
    return node
  }
  return {ok: true, body: JSON.stringify(walk(parsed, '')), minted}
}

/**
 * Where a minted login goes in the list: in front, replacing none (an access
 * token the agent still holds keeps working until it expires), but at most
 * `keep` per name, the oldest dropped.
 */
export function addMinted(logins: readonly AgentLogin[], minted: readonly AgentLogin[], keep = 4): AgentLogin[] {
  const out = [...minted, ...logins.filter((l) => !minted.some((m) => m.value === l.value))]
  const count = new Map<string, number>()
  return out.filter((l) => {
    const n = (count.get(l.name) ?? 0) + 1
    count.set(l.name, n)
    return n <= keep
  })
}
