/**
 * Masked secrets (docs/design.md, "The egress gateway"): a `secretEnv` entry
 * `{name, hosts}` gives the sandbox a surrogate of the same shape, and only
 * the gateway the real value, which it puts in place of the surrogate in the
 * headers of requests to the declared hosts. Pure.
 */
import {createHmac} from 'node:crypto'
import {ruleHostMatches} from './rules.js'

export type SecretEnvEntry = string | {name: string; hosts: string[]}

export interface MaskedSecret {
  name: string
  hosts: string[]
  surrogate: string
  /** Absent in a gateway made anew where the variable was not set (gateway-container.ts remakeGateway): the surrogate is then refused at every host. */
  value?: string
}

export const secretName = (entry: SecretEnvEntry): string => (typeof entry === 'string' ? entry : entry.name)
export const isMasked = (entry: SecretEnvEntry): entry is {name: string; hosts: string[]} => typeof entry !== 'string'

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
/** `sk-`, `sk-proj-`, `ghp_`, `github_pat_`, `xoxb-`: a token's kind, which clients and servers check, is kept. */
const PREFIX = /^(?:[A-Za-z][A-Za-z0-9]{0,9}[-_]){1,3}/

/**
 * A surrogate for `value`: its prefix and length, every other letter or digit
 * replaced by one drawn from an HMAC under `key` (the sandbox's own, so each
 * sandbox gets its own surrogate, the same at every start), other characters
 * (`-`, `.`, `_`) kept in place. One-way: it says nothing of the value.
 */
export function makeSurrogate(name: string, value: string, key: string): string {
  const prefix = PREFIX.exec(value)?.[0] ?? ''
  const kept = prefix.length * 2 <= value.length ? prefix.length : 0
  let out = value.slice(0, kept)
  let stream = Buffer.alloc(0)
  for (let i = kept, round = 0; i < value.length; i++) {
    if (!stream.length) stream = createHmac('sha256', key).update(`${name}\0${value}\0${round++}`).digest()
    const c = value[i]
    if (/[A-Za-z0-9]/.test(c)) {
      out += ALNUM[stream[0] % ALNUM.length]
      stream = stream.subarray(1)
    } else out += c
  }
  return out === value ? `${out.slice(0, -1)}${out.endsWith('x') ? 'y' : 'x'}` : out
}

/** Whether a surrogate made for one value fits another: the same length, prefix and non-alphanumeric characters in place. */
export function sameShape(a: string, b: string): boolean {
  const shape = (v: string) => `${PREFIX.exec(v)?.[0] ?? ''}\0${v.replace(/[A-Za-z0-9]/g, 'x')}`
  return shape(a) === shape(b)
}

export type SwapVerdict = {ok: true; headers: Array<[string, string]>; swapped: string[]} | {ok: false; rule: string}

/**
 * Put the real values in place of the surrogates in a request's headers
 * (Authorization: Basic decoded and encoded again), for the secrets declared
 * for `host` and over TLS only. A surrogate anywhere else (another host, plain
 * HTTP, the request target) refuses the whole request.
 */
export function swapSecrets(host: string, secure: boolean, target: string, headers: Array<[string, string]>, secrets: readonly MaskedSecret[]): SwapVerdict {
  if (!secrets.length) return {ok: true, headers, swapped: []}
  const declared = (s: MaskedSecret) => s.hosts.some((h) => ruleHostMatches(h, host))
  const refuse = (s: MaskedSecret, where: string): SwapVerdict => ({
    ok: false,
    rule: declared(s) ? `secret ${s.name} ${where} only over HTTPS` : `secret ${s.name} is not for ${host} (declared for ${s.hosts.join(', ')})`,
  })
  for (const s of secrets) if (target.includes(s.surrogate)) return {ok: false, rule: `secret ${s.name} in the request target`}
  const swapped = new Set<string>()
  const out: Array<[string, string]> = []
  for (const [key, value] of headers) {
    let next = value
    const basic = key.toLowerCase() === 'authorization' ? /^(basic)\s+([A-Za-z0-9+/=]+)\s*$/i.exec(value) : null
    let decoded = basic ? Buffer.from(basic[2], 'base64').toString('utf8') : undefined
    for (const s of secrets) {
      const inPlain = next.includes(s.surrogate)
      const inBasic = decoded?.includes(s.surrogate) ?? false
      if (!inPlain && !inBasic) continue
      if (!declared(s) || !secure) return refuse(s, `in header ${key}`)
      // Fail closed: a surrogate is never passed on in place of a value the gateway lacks.
      if (s.value === undefined) return {ok: false, rule: `secret ${s.name} has no value in this gateway (made anew where ${s.name} was not set)`}
      const value = s.value
      swapped.add(s.name)
      if (inPlain) next = next.split(s.surrogate).join(value)
      else if (basic && decoded !== undefined) {
        decoded = decoded.split(s.surrogate).join(value)
        next = `${basic[1]} ${Buffer.from(decoded, 'utf8').toString('base64')}`
      }
    }
    out.push([key, next])
  }
  return {ok: true, headers: out, swapped: [...swapped]}
}
