/**
 * A minimal DNS client (A and AAAA over UDP) for the gateway. Node's own
 * Resolver (c-ares 1.34) keeps answers for their TTL, so a host that moved
 * would still be dialled at its old address; the firewall's design is to
 * follow DNS at once (dnsmasq runs without a cache), so the gateway asks the
 * sandbox's resolver every time, and that also puts the answer in the
 * firewall's ipset before the gateway connects.
 */
import {createSocket} from 'node:dgram'
import {isIPv6} from 'node:net'

export const TYPE_A = 1
export const TYPE_AAAA = 28

/** A recursive query for `name` (no trailing dot needed). Pure. */
export function encodeQuery(name: string, type: number, id: number): Buffer {
  const labels = name.replace(/\.$/, '').split('.')
  const parts: Buffer[] = [Buffer.from([id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0])]
  for (const label of labels) {
    const bytes = Buffer.from(label, 'latin1')
    if (bytes.length === 0 || bytes.length > 63) throw new Error(`invalid name ${name}`)
    parts.push(Buffer.from([bytes.length]), bytes)
  }
  parts.push(Buffer.from([0, type >> 8, type & 0xff, 0, 1]))
  return Buffer.concat(parts)
}

export interface DnsAnswer {
  rcode: number
  addresses: string[]
}

/** The addresses of `type` in a response to query `id`; undefined if it is not that response. Pure. */
export function parseResponse(buf: Buffer, id: number, type: number): DnsAnswer | undefined {
  if (buf.length < 12 || buf.readUInt16BE(0) !== id || (buf[2] & 0x80) === 0) return undefined
  const rcode = buf[3] & 0x0f
  const qd = buf.readUInt16BE(4)
  const an = buf.readUInt16BE(6)
  let p = 12
  for (let i = 0; i < qd; i++) p = skipName(buf, p) + 4
  const addresses: string[] = []
  for (let i = 0; i < an && p < buf.length; i++) {
    p = skipName(buf, p)
    if (p + 10 > buf.length) break
    const rtype = buf.readUInt16BE(p)
    const length = buf.readUInt16BE(p + 8)
    const data = buf.subarray(p + 10, p + 10 + length)
    if (rtype === type && type === TYPE_A && length === 4) addresses.push([...data].join('.'))
    if (rtype === type && type === TYPE_AAAA && length === 16) {
      const groups: string[] = []
      for (let g = 0; g < 16; g += 2) groups.push(data.readUInt16BE(g).toString(16))
      addresses.push(groups.join(':'))
    }
    p += 10 + length
  }
  return {rcode, addresses}
}

function skipName(buf: Buffer, start: number): number {
  let p = start
  while (p < buf.length) {
    const len = buf[p]
    if (len === 0) return p + 1
    if ((len & 0xc0) === 0xc0) return p + 2
    p += 1 + len
  }
  return p
}

/** Ask `server` for `name`'s addresses of `type`; rejects with a code (ENOTFOUND, ETIMEOUT, ...). */
export function query(server: string, name: string, type: number, {port = 53, timeoutMs = 2000, tries = 2} = {}): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = createSocket(isIPv6(server) ? 'udp6' : 'udp4')
    const id = Math.floor(Math.random() * 0x10000)
    const packet = encodeQuery(name, type, id)
    let attempt = 0
    let timer: NodeJS.Timeout | undefined
    const done = (error: Error | undefined, addresses?: string[]) => {
      clearTimeout(timer)
      socket.close()
      if (error) reject(error)
      else resolve(addresses ?? [])
    }
    const send = () => {
      attempt++
      socket.send(packet, port, server)
      timer = setTimeout(() => (attempt < tries ? send() : done(Object.assign(new Error(`no answer for ${name}`), {code: 'ETIMEOUT'}))), timeoutMs)
    }
    socket.on('error', (e) => done(e))
    socket.on('message', (msg) => {
      const answer = parseResponse(msg, id, type)
      if (!answer) return
      if (answer.rcode === 3) return done(Object.assign(new Error(`${name} does not exist`), {code: 'ENOTFOUND'}))
      if (answer.rcode !== 0) return done(Object.assign(new Error(`DNS error ${answer.rcode} for ${name}`), {code: `RCODE${answer.rcode}`}))
      done(undefined, answer.addresses)
    })
    send()
  })
}
