/**
 * The firewall's denied connections (tcpdump's lines in denied.log), and the
 * allowlist entry that would allow each: the name its address was looked up
 * as, with the port and protocol it was refused on. Pure.
 */
import {coveredBy, isWebEntry, parseAllowEntry} from '../util/allow-entry.js'

/** One denied packet, from a tcpdump line of denied.log. */
export interface DeniedConnection {
  time: string
  protocol: string
  source: string
  destination: string
  line: string
  /** The entry that would allow it (`name:PORT`, `name:PORT/udp`), when its address is an allowlisted name's. */
  allowedBy?: string
}

/**
 * `03:15:24.057260 IP 10.231.7.2.44918 > 10.231.7.1.80: tcp 0` (tcpdump -q on
 * NFLOG) to its parts; addresses keep their port as `addr:port` (`[v6]:port`).
 */
export function parseDeniedLine(line: string): DeniedConnection {
  const match = /^(\S+) (IP6?) (\S+) > (\S+?): (.*)$/.exec(line.trim())
  if (!match) return {time: '', protocol: '', source: '', destination: '', line}
  const [, time, family, src, dst, rest] = match
  const word = rest.split(/[\s,]+/)[0] ?? ''
  const protocol = /^(tcp|udp)$/i.test(word) ? word.toLowerCase() : /icmp6?/i.exec(rest)?.[0].toLowerCase() ?? word.toLowerCase()
  const withPort = protocol === 'tcp' || protocol === 'udp'
  return {time, protocol, source: endpoint(src, family === 'IP6', withPort), destination: endpoint(dst, family === 'IP6', withPort), line}
}

function endpoint(text: string, v6: boolean, withPort: boolean): string {
  if (!withPort) return text
  const dot = text.lastIndexOf('.')
  if (dot === -1) return text
  const address = text.slice(0, dot)
  return v6 ? `[${address}]:${text.slice(dot + 1)}` : `${address}:${text.slice(dot + 1)}`
}


/** An address and the name it was last an answer for (firewall-status, from dnsmasq.log). */
export interface ResolvedAddress {
  address: string
  name: string
}

/**
 * The entry that would allow a denied TCP or UDP connection: its destination
 * was an answer for an allowlisted name, refused on a port that name's entries
 * do not declare. Undefined for an address no allowlisted name resolved to.
 */
export function allowedBy(conn: DeniedConnection, allowlist: string[], resolved: ResolvedAddress[]): string | undefined {
  if (conn.protocol !== 'tcp' && conn.protocol !== 'udp') return undefined
  const m = /^\[?(.*?)\]?:(\d+)$/.exec(conn.destination)
  if (!m) return undefined
  const [, address, port] = m
  const name = resolved.find((r) => r.address === address)?.name?.replace(/\.$/, '').toLowerCase()
  if (!name) return undefined
  const bases = allowlist.flatMap((e) => {
    const p = parseAllowEntry(e)
    return p.ok ? [p.entry.base] : []
  })
  if (!bases.some((b) => coveredBy(name, b))) return undefined
  if (conn.protocol === 'tcp' && (port === '80' || port === '443')) {
    return allowlist.some((e) => isWebEntry(e) && coveredBy(name, e.replace(/^\*\./, ''))) ? undefined : name
  }
  return `${name}:${port}${conn.protocol === 'udp' ? '/udp' : ''}`
}
