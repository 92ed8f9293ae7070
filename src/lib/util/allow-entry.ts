/**
 * Allowlist entries (allowDomains, `firewall allow`, default-domains.txt), as
 * init-firewall.sh reads them: `name` is TCP 80 and 443 through the egress
 * gateway, `name:PORT` that TCP port, `name:PORT/udp` that UDP port. The name
 * (`host` or `*.host`) covers its subdomains either way. Pure.
 */

const HOST = /^(\*\.)?([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/

export interface AllowEntry {
  /** `host` or `*.host`, lower-cased. */
  name: string
  /** `host`: what dnsmasq matches (with its subdomains). */
  base: string
  /** Undefined: TCP 80 and 443 through the gateway. */
  port?: number
  protocol: 'tcp' | 'udp'
  /** The entry in its one written form (`:PORT/tcp` is `:PORT`). */
  text: string
}

export type ParsedEntry = {ok: true; entry: AllowEntry} | {ok: false; reason: string}

/** An entry, or why it is not one (a sentence naming the fix). */
export function parseAllowEntry(raw: string): ParsedEntry {
  const text = raw.trim().toLowerCase()
  const m = /^(.*):(\d{1,5})(?:\/(tcp|udp))?$/.exec(text)
  const name = m ? m[1] : text
  const port = m ? Number(m[2]) : undefined
  const protocol = (m?.[3] ?? 'tcp') as 'tcp' | 'udp'
  const base = name.replace(/^\*\./, '')
  const hostOk = HOST.test(name) && base.length <= 253 && !/^\d+$/.test(base.split('.').pop() ?? '')
  if (!hostOk || (port !== undefined && (port < 1 || port > 65535))) {
    return {ok: false, reason: 'expected a host name such as example.com or *.example.com, optionally with :PORT or :PORT/udp (e.g. github.com:22)'}
  }
  if (port !== undefined && protocol === 'tcp' && (port === 80 || port === 443)) {
    return {ok: false, reason: `TCP ports 80 and 443 are what ${name} alone allows (through the egress gateway): write ${name}`}
  }
  return {ok: true, entry: {name, base, port, protocol, text: port === undefined ? name : `${name}:${port}${protocol === 'udp' ? '/udp' : ''}`}}
}

/** Whether an entry is a bare name: web traffic through the gateway (not a declared port). */
export function isWebEntry(entry: string): boolean {
  return !entry.includes(':')
}

/** Whether `host` is `base` or one of its subdomains. */
export function coveredBy(host: string, base: string): boolean {
  return host === base || host.endsWith(`.${base}`)
}
