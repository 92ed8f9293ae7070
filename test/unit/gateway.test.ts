/** The egress gateway's pure parts: ClientHello parsing, the name decisions, the request log. */
import {connect as tlsConnect} from 'node:tls'
import {createSocket} from 'node:dgram'
import {createServer} from 'node:net'
import {describe, expect, it} from 'vitest'
import {encodeQuery, parseResponse, query, TYPE_A, TYPE_AAAA} from '../../src/lib/network/gateway/dns.js'
import {formatRequest, parseRequestLog, type RequestLogEntry} from '../../src/lib/network/gateway/log.js'
import {allowlistMatch, decideHttp, decideSni, normaliseHost, parseDomainList, pathOnly} from '../../src/lib/network/gateway/policy.js'
import {parseClientHello} from '../../src/lib/network/gateway/sni.js'

/** A real ClientHello, as node's TLS client sends it to a loopback listener that only records it. */
async function clientHello(servername: string | undefined, alpn?: string[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => {
      socket.once('data', (chunk: Buffer) => {
        resolve(chunk)
        socket.destroy()
        server.close()
      })
    })
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      if (typeof address !== 'object' || !address) return reject(new Error('no port'))
      const client = tlsConnect({port: address.port, host: '127.0.0.1', ...(servername ? {servername} : {}), ALPNProtocols: alpn, rejectUnauthorized: false})
      client.on('error', () => undefined)
    })
  })
}

describe('parseClientHello', () => {
  it('reads the SNI and ALPN of a real ClientHello', async () => {
    const hello = await clientHello('api.example.com', ['h2', 'http/1.1'])
    expect(parseClientHello(hello)).toEqual({state: 'done', sni: 'api.example.com', alpn: ['h2', 'http/1.1']})
  })

  it('has no SNI when the client sends none', async () => {
    const hello = await clientHello(undefined)
    expect(parseClientHello(hello)).toMatchObject({state: 'done', sni: undefined})
  })

  it('asks for more until the whole hello is in, byte by byte', async () => {
    const hello = await clientHello('a.example')
    for (let n = 0; n < hello.length; n++) expect(parseClientHello(hello.subarray(0, n)).state).toBe('need-more')
    expect(parseClientHello(hello)).toMatchObject({state: 'done', sni: 'a.example'})
  })

  it('reads a hello split over two TLS records', async () => {
    const hello = await clientHello('split.example')
    const body = hello.subarray(5)
    const cut = 40
    const record = (part: Buffer) => Buffer.concat([Buffer.from([22, 3, 1, part.length >> 8, part.length & 0xff]), part])
    expect(parseClientHello(Buffer.concat([record(body.subarray(0, cut)), record(body.subarray(cut))]))).toMatchObject({state: 'done', sni: 'split.example'})
  })

  it('refuses what is not a TLS handshake', () => {
    expect(parseClientHello(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'))).toMatchObject({state: 'not-tls'})
    expect(parseClientHello(Buffer.from([22, 3, 1, 0, 4, 2, 0, 0, 0]))).toMatchObject({state: 'not-tls', reason: 'first handshake message is not a ClientHello'})
  })
})

describe('the gateway decisions', () => {
  const list = parseDomainList('# comment\nregistry.npmjs.org\n*.example.com  github.com # trailing\n')

  it('matches an entry and its subdomains, as the firewall does, and nothing that only ends alike', () => {
    expect(list).toEqual(['registry.npmjs.org', '*.example.com', 'github.com'])
    expect(allowlistMatch('github.com', list)).toBe('github.com')
    expect(allowlistMatch('api.github.com', list)).toBe('github.com')
    expect(allowlistMatch('example.com', list)).toBe('*.example.com')
    expect(allowlistMatch('evilgithub.com', list)).toBeUndefined()
    expect(allowlistMatch('github.com.evil.test', list)).toBeUndefined()
  })

  it('normalises a Host header: case, port, trailing dot, IPv6 brackets; refuses junk', () => {
    expect(normaliseHost('GitHub.com:443')).toBe('github.com')
    expect(normaliseHost('github.com.')).toBe('github.com')
    expect(normaliseHost('[fd00::1]:80')).toBe('fd00::1')
    for (const bad of ['', 'a b', 'x/y', 'a..b', undefined]) expect(normaliseHost(bad), String(bad)).toBeUndefined()
  })

  it('decides HTTP by the Host header, refusing other names, addresses and a target that names another host', () => {
    expect(decideHttp('github.com', '/x', list)).toMatchObject({allowed: true, rule: 'allowlist github.com'})
    expect(decideHttp('evil.test', '/x', list)).toMatchObject({allowed: false, status: 403, rule: 'not allowlisted'})
    expect(decideHttp('10.0.0.1', '/x', list)).toMatchObject({allowed: false, status: 403})
    expect(decideHttp(undefined, '/x', list)).toMatchObject({allowed: false, status: 400})
    expect(decideHttp('github.com', 'http://evil.test/x', list)).toMatchObject({allowed: false, status: 400})
    expect(decideHttp('github.com', 'http://github.com/x', list)).toMatchObject({allowed: true})
  })

  it('decides TLS by the SNI alone', () => {
    expect(decideSni('registry.npmjs.org', list)).toMatchObject({allowed: true})
    expect(decideSni('evil.test', list)).toMatchObject({allowed: false, rule: 'not allowlisted'})
    expect(decideSni(undefined, list)).toMatchObject({allowed: false, rule: 'no SNI'})
  })

  it('logs paths without their query', () => {
    expect(pathOnly('/a/b?token=secret#f')).toBe('/a/b')
    expect(pathOnly('http://h/a?x=1')).toBe('/a')
    expect(pathOnly('?x')).toBe('/')
  })
})

describe('the request log', () => {
  const entry: RequestLogEntry = {time: '2026-11-26T00:00:00.000Z', method: 'GET', host: 'h', path: '/p', status: 200, bytes: 5, decision: 'allowed', rule: 'allowlist h'}

  it('parses its lines, skipping a torn one', () => {
    expect(parseRequestLog(`${JSON.stringify(entry)}\n{"time":"2026`)).toEqual([entry])
  })

  it('formats one line a request', () => {
    expect(formatRequest(entry)).toBe('2026-11-26T00:00:00.000Z  ALLOW  200  GET  h/p  5B  (allowlist h)')
    expect(formatRequest({...entry, status: 0, decision: 'blocked', method: 'TLS', path: '', rule: 'no SNI'})).toContain('BLOCK  -  TLS  h  5B  (no SNI)')
  })
})

describe('the gateway\'s DNS client', () => {
  /** A response to `query` with the given answers (name pointers to the question), as a resolver sends it. */
  function respond(queryPacket: Buffer, rcode: number, answers: Array<{type: number; data: number[]}>): Buffer {
    const header = Buffer.from(queryPacket.subarray(0, 12))
    header[2] = 0x81
    header[3] = 0x80 | rcode
    header.writeUInt16BE(answers.length, 6)
    const records = answers.map((a) => Buffer.from([0xc0, 12, a.type >> 8, a.type & 0xff, 0, 1, 0, 0, 0, 60, 0, a.data.length, ...a.data]))
    return Buffer.concat([header, queryPacket.subarray(12), ...records])
  }

  it('encodes a recursive query and reads A and AAAA answers of its own id only', () => {
    const q = encodeQuery('api.example.com', TYPE_A, 0x1234)
    expect(q.subarray(0, 4)).toEqual(Buffer.from([0x12, 0x34, 0x01, 0x00]))
    expect(q.subarray(12).toString('latin1')).toBe('\x03api\x07example\x03com\x00\x00\x01\x00\x01')
    const r = respond(q, 0, [{type: TYPE_A, data: [10, 0, 0, 7]}, {type: 5, data: [0]}])
    expect(parseResponse(r, 0x1234, TYPE_A)).toEqual({rcode: 0, addresses: ['10.0.0.7']})
    expect(parseResponse(r, 0x9999, TYPE_A)).toBeUndefined()
    const q6 = encodeQuery('h', TYPE_AAAA, 1)
    expect(parseResponse(respond(q6, 0, [{type: TYPE_AAAA, data: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]}]), 1, TYPE_AAAA)?.addresses).toEqual(['fd00:0:0:0:0:0:0:1'])
  })

  it('asks the resolver every time (no cache), and says ENOTFOUND for NXDOMAIN', async () => {
    const answers = [[10, 0, 0, 1], [10, 0, 0, 2]]
    let asked = 0
    const server = createSocket('udp4')
    server.on('message', (msg, from) => {
      const name = msg.subarray(13, 13 + msg[12]).toString()
      const reply = name === 'gone' ? respond(msg, 3, []) : respond(msg, 0, [{type: TYPE_A, data: answers[asked++ % 2]}])
      server.send(reply, from.port, from.address)
    })
    await new Promise<void>((resolve) => server.bind(0, '127.0.0.1', resolve))
    const port = server.address().port
    try {
      expect(await query('127.0.0.1', 'moving', TYPE_A, {port})).toEqual(['10.0.0.1'])
      expect(await query('127.0.0.1', 'moving', TYPE_A, {port})).toEqual(['10.0.0.2'])
      await expect(query('127.0.0.1', 'gone', TYPE_A, {port})).rejects.toMatchObject({code: 'ENOTFOUND'})
    } finally {
      server.close()
    }
  })
})
