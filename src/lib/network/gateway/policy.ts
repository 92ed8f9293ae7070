/**
 * The gateway's decisions, as pure functions: which names are allowlisted
 * (the firewall's own list: each entry allows its subdomains), and what a
 * request's destination is, from its Host header or SNI alone.
 */
import {isIP} from 'node:net'
import {isWebEntry} from '../../util/allow-entry.js'

/** Entries of a domain list file (default-domains.txt): words, `#` comments. */
export function parseDomainList(text: string): string[] {
  return text
    .split('\n')
    .flatMap((line) => (line.split('#')[0] ?? '').split(/[\s,]+/))
    .map((d) => d.trim().toLowerCase())
    .filter(Boolean)
}

/** `AGENT_SANDBOX_ALLOW_DOMAINS`: comma, space or newline separated. */
export function parseDomainEnv(text: string | undefined): string[] {
  return (text ?? '')
    .split(/[\s,]+/)
    .map((d) => d.trim().toLowerCase())
    .filter(Boolean)
}

/**
 * The allowlist entry that admits `host` to the web (TCP 80 and 443), if any.
 * `example.com` and `*.example.com` both admit the name and every subdomain,
 * as dnsmasq does for the firewall; `name:PORT` entries admit no web traffic.
 */
export function allowlistMatch(host: string, entries: Iterable<string>): string | undefined {
  for (const entry of entries) {
    // `name:PORT` opens that port directly; only a bare name is web traffic through the gateway.
    if (!isWebEntry(entry)) continue
    const base = entry.startsWith('*.') ? entry.slice(2) : entry
    if (host === base || host.endsWith(`.${base}`)) return entry
  }
  return undefined
}

/**
 * The host of a Host header (or absolute URL authority): lower-cased, without
 * its port or trailing dot; IPv6 literals without brackets. Undefined when it
 * is not a plausible host.
 */
export function normaliseHost(text: string | undefined): string | undefined {
  if (text === undefined) return undefined
  let host = text.trim().toLowerCase()
  const v6 = /^\[([0-9a-f:.]+)\](:\d{1,5})?$/.exec(host)
  if (v6) return v6[1]
  host = host.replace(/:\d{1,5}$/, '').replace(/\.$/, '')
  if (!/^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/.test(host) || host.length > 253 || host.includes('..')) return undefined
  return host
}

export function isIpLiteral(host: string): boolean {
  return isIP(host) !== 0
}

export type Verdict = {allowed: true; rule: string} | {allowed: false; rule: string; status: number}

/**
 * Where an HTTP request may go: the Host header names it, and an absolute-form
 * target (`GET http://x/`) must name the same host. An IP address is never an
 * allowlisted name.
 */
export function decideHttp(hostHeader: string | undefined, target: string, allowlist: Iterable<string>): Verdict & {host?: string} {
  const host = normaliseHost(hostHeader)
  if (!host) return {allowed: false, rule: 'no valid Host header', status: 400}
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) {
    let authority: string | undefined
    try {
      authority = normaliseHost(new URL(target).host)
    } catch {
      authority = undefined
    }
    if (authority !== host) return {allowed: false, rule: `request target host ${authority ?? '?'} differs from Host ${host}`, status: 400, host}
  }
  return {...decideName(host, allowlist), host}
}

/** A TLS connection's SNI (pass-through: the Host header inside is not seen). */
export function decideSni(sni: string | undefined, allowlist: Iterable<string>): Verdict & {host?: string} {
  if (sni === undefined) return {allowed: false, rule: 'no SNI', status: 0}
  const host = normaliseHost(sni)
  if (!host) return {allowed: false, rule: 'invalid SNI', status: 0}
  return {...decideName(host, allowlist), host}
}

function decideName(host: string, allowlist: Iterable<string>): Verdict {
  if (isIpLiteral(host)) return {allowed: false, rule: 'IP address, not an allowlisted name', status: 403}
  const entry = allowlistMatch(host, allowlist)
  return entry ? {allowed: true, rule: `allowlist ${entry}`} : {allowed: false, rule: 'not allowlisted', status: 403}
}

/** The path of a request target without its query or fragment (never logged: it may hold tokens). */
export function pathOnly(target: string): string {
  let path = target
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) {
    try {
      path = new URL(path).pathname
    } catch {
      return '?'
    }
  }
  return path.split(/[?#]/)[0] || '/'
}
