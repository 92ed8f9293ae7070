import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {PassThrough} from 'node:stream'
import type {Duplex} from 'node:stream'
import {afterAll, beforeAll, describe, expect, it} from 'vitest'
import {EngineApi, EngineApiError, demultiplex, queryString} from '../../src/lib/engine/api.js'
import {ApiContainers, isNameInUse, isNotFound} from '../../src/lib/engine/containers.js'
import {ApiVolumes} from '../../src/lib/engine/volumes.js'
import {EngineError, SandboxError} from '../../src/lib/errors.js'

function frame(stream: 1 | 2, text: string): Buffer {
  const body = Buffer.from(text, 'utf8')
  const header = Buffer.alloc(8)
  header[0] = stream
  header.writeUInt32BE(body.length, 4)
  return Buffer.concat([header, body])
}

interface Seen {
  method: string
  url: string
  body: string
}

/** A stand-in engine on a unix socket: enough of the API for the calls under test. */
let server: Server
let dir: string
let socketPath: string
const seen: Seen[] = []
let lateLooks = 0

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

function json(res: ServerResponse, status: number, value?: unknown): void {
  if (value === undefined) {
    res.writeHead(status).end()
    return
  }
  res.writeHead(status, {'Content-Type': 'application/json'}).end(JSON.stringify(value))
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'engine-api-'))
  socketPath = join(dir, 'engine.sock')
  server = createServer(async (req, res) => {
    const text = await body(req)
    seen.push({method: req.method ?? '', url: req.url ?? '', body: text})
    const url = req.url ?? ''
    if (url === '/hang') return
    if (url === '/cut-body') {
      // Half of the promised body, then the connection goes.
      res.writeHead(200, {'Content-Type': 'application/json', 'Content-Length': '100'})
      res.write('{"Id": "ab')
      setTimeout(() => res.socket?.destroy(), 20)
      return
    }
    if (url === '/slow') return void setTimeout(() => json(res, 200, {late: true}), 600)
    if (url === '/containers/missing/json') return json(res, 404, {message: 'No such container: missing'})
    if (url === '/containers/box/json') return json(res, 200, {Id: 'abc', Name: '/box', Config: {Image: 'img', Labels: {a: 'b'}}, Image: 'sha', State: {Running: true, Status: 'running'}, HostConfig: {}, Mounts: []})
    if (url.startsWith('/containers/json')) return json(res, 200, [{Id: 'abc', Names: ['/box'], Image: 'img', State: 'running', Status: 'Up', Labels: null}])
    if (url === '/containers/abc/start') return json(res, 304)
    if (url === '/containers/abc/exec') return json(res, 201, {Id: JSON.parse(text).AttachStdin ? 'e2' : 'e1'})
    if (url === '/containers/late/exec') return json(res, 201, {Id: 'e3'})
    if (url === '/containers/cut/exec') return json(res, 201, {Id: 'e4'})
    if (url === '/exec/e3/start' || url === '/exec/e4/start') {
      res.writeHead(200, {'Content-Type': 'application/vnd.docker.raw-stream'})
      res.end(frame(1, 'partial'))
      return
    }
    // The exit is recorded on the third look (e3), or never: the stream was cut while the process ran (e4).
    if (url === '/exec/e3/json') {
      lateLooks++
      return json(res, 200, lateLooks < 3 ? {Running: true, ExitCode: null} : {Running: false, ExitCode: 5})
    }
    if (url === '/exec/e4/json') return json(res, 200, {Running: true, ExitCode: null})
    if (url === '/exec/e1/start') {
      // Split a frame across writes, as the engine's stream may.
      const out = Buffer.concat([frame(1, 'hello '), frame(2, 'warn\n'), frame(1, 'world\n')])
      res.writeHead(200, {'Content-Type': 'application/vnd.docker.raw-stream'})
      res.write(out.subarray(0, 5))
      res.write(out.subarray(5, 17))
      res.end(out.subarray(17))
      return
    }
    if (url === '/exec/e1/json' || url === '/exec/e2/json') return json(res, 200, {ExitCode: url.includes('e1') ? 3 : 0})
    if (url === '/volumes/create') return json(res, 201, {Name: JSON.parse(text).Name, Labels: JSON.parse(text).Labels, Mountpoint: '/m'})
    if (url === '/volumes/newvol') return json(res, 404, {message: 'get newvol: no such volume'})
    return json(res, 500, {message: `unexpected ${req.method} ${url}`})
  })
  // Exec with stdin: the engine upgrades the connection and echoes stdin back once it ends.
  server.on('upgrade', (req: IncomingMessage, socket: Duplex) => {
    seen.push({method: req.method ?? '', url: req.url ?? '', body: ''})
    socket.write('HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n')
    const input: Buffer[] = []
    socket.on('data', (c: Buffer) => input.push(c))
    socket.on('end', () => {
      socket.end(frame(1, `got: ${Buffer.concat(input).toString('utf8')}`))
    })
  })
  await new Promise<void>((resolve) => server.listen(socketPath, resolve))
})

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
  rmSync(dir, {recursive: true, force: true})
})

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((r) => setTimeout(r, 10))
}

const api = () => new EngineApi({kind: 'socket', socketPath, dockerHost: `unix://${socketPath}`})

describe('EngineApi', () => {
  it('encodes a query, leaving out undefined values', () => {
    expect(queryString({all: true, t: 3, name: 'a b', skip: undefined})).toBe('?all=true&t=3&name=a%20b')
    // Filters are JSON: every character that means something in a query is escaped, and the engine reads it back whole.
    const filters = JSON.stringify({label: ['a=b&c', 'd+e'], name: ['x y#']})
    expect(new URLSearchParams(queryString({filters}).slice(1)).get('filters')).toBe(filters)
    expect(queryString({})).toBe('')
  })

  it('maps an engine error to statusCode and the engine message, like dockerode', async () => {
    const error = await api()
      .json('GET', '/containers/missing/json')
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(EngineApiError)
    expect(isNotFound(error)).toBe(true)
    expect((error as Error).message).toBe('(HTTP code 404) No such container: missing (GET /containers/missing/json)')
  })

  it("takes Podman's 500 for a container being removed as not found, and no other 500", () => {
    expect(isNotFound(new EngineApiError('(HTTP code 500) getting container from store "fa9c": container not known (GET /containers/x/json)', 500))).toBe(true)
    expect(isNotFound(new EngineApiError('(HTTP code 500) container state improper (POST /containers/x/exec)', 500))).toBe(false)
    expect(isNotFound(new EngineApiError('(HTTP code 409) Conflict', 409))).toBe(false)
  })

  it('recognises a create refused for a name in use, on Docker (409) and Podman (500), and nothing else', () => {
    expect(isNameInUse(new EngineApiError('(HTTP code 409) Conflict. The container name "/x" is already in use', 409))).toBe(true)
    expect(isNameInUse(new EngineApiError('(HTTP code 500) container create: name "x" is in use: container already exists (POST /containers/create)', 500))).toBe(true)
    expect(isNameInUse(new EngineApiError('(HTTP code 500) something else', 500))).toBe(false)
  })

  it('classifies a connection failure where the call is made: one EngineError, its errno kept as the cause', async () => {
    const gone = new EngineApi({kind: 'socket', socketPath: join(dir, 'nothing.sock'), dockerHost: 'unix:///x'})
    const error = await gone.json('GET', '/_ping').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(EngineError)
    expect((error as EngineError).kind).toBe('socket-not-found')
    expect((error as EngineError).exitCode).toBe(3)
    expect(((error as Error).cause as {code?: string}).code).toBe('ENOENT')
  })

  it('rejects a body cut off before its end as an EngineError, never as the part that came', async () => {
    const error = await api()
      .json('GET', '/cut-body')
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(EngineError)
    expect((error as EngineError).exitCode).toBe(3)
    // The control: a whole body of the same call shape parses.
    expect(await api().json('GET', '/containers/box/json')).toMatchObject({Id: 'abc'})
  })

  it('times out a call the engine never answers, and leaves a call without a limit (wait) alone', async () => {
    const started = Date.now()
    const error = await api()
      .json('GET', '/hang', {timeoutMs: 300})
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(EngineError)
    expect((error as Error).message).toBe('the container engine did not answer GET /hang within 0.3 s')
    expect(Date.now() - started).toBeLessThan(5_000)
    // The control: the same call without a limit gets the answer that comes after 0.6 s.
    expect(await api().json('GET', '/slow', {timeoutMs: 0})).toEqual({late: true})
  })

  it('dispatches a call without waiting for its answer: the engine has the request, an error answer or no engine is not thrown', async () => {
    const before = seen.length
    // /hang is never answered: waiting for it would never resolve.
    await api().dispatch('POST', '/hang', {query: {signal: 'SIGTERM'}})
    await until(() => seen.length > before)
    expect(seen.slice(before).map((s) => `${s.method} ${s.url}`)).toEqual(['POST /hang?signal=SIGTERM'])
    // An error answer (500 here) and an engine that is not there are both ignored.
    await api().dispatch('POST', '/containers/nope/kill')
    await new EngineApi({kind: 'socket', socketPath: join(dir, 'none.sock'), dockerHost: 'unix://none'}).dispatch('POST', '/x')
    // kill with answer: false is such a call (the stand-in answers 500 to it).
    const killed = () => seen.some((s) => s.url === '/containers/box/kill?signal=SIGTERM')
    expect(killed()).toBe(false)
    await new ApiContainers(api()).kill('box', 'SIGTERM', {answer: false})
    await until(killed)
    expect(killed()).toBe(true)
  })
})

describe('ApiContainers and ApiVolumes against a stand-in engine', () => {
  it('inspects, treats 404 as missing, and lists with label filters', async () => {
    const containers = new ApiContainers(api())
    expect((await containers.inspect('box'))?.labels).toEqual({a: 'b'})
    expect(await containers.inspect('missing')).toBeUndefined()
    const rows = await containers.list({'dev.agent-sandbox.managed': 'true'})
    expect(rows).toEqual([{id: 'abc', name: 'box', image: 'img', state: 'running', status: 'Up', labels: {}}])
    const call = seen.find((s) => s.url.startsWith('/containers/json'))
    expect(decodeURIComponent(call?.url ?? '')).toBe('/containers/json?all=true&filters={"label":["dev.agent-sandbox.managed=true"]}')
  })

  it('treats 304 on start as already started', async () => {
    await expect(new ApiContainers(api()).start('abc')).resolves.toBeUndefined()
  })

  it('runs an exec: demultiplexes its output (frames split across writes) and returns its exit code', async () => {
    const chunks: string[] = []
    const result = await new ApiContainers(api()).exec('abc', ['sh', '-c', 'x'], {user: 'node', onStdout: (c) => chunks.push(c.toString())})
    expect(result).toEqual({exitCode: 3, stdout: 'hello world\n', stderr: 'warn\n'})
    expect(chunks.join('')).toBe('hello world\n')
    const create = seen.find((s) => s.url === '/containers/abc/exec')
    expect(JSON.parse(create?.body ?? '{}')).toMatchObject({Cmd: ['sh', '-c', 'x'], User: 'node', AttachStdin: false, AttachStdout: true})
  })

  it('runs an exec with stdin over an upgraded connection, ending stdin so the process sees end of file', async () => {
    const stdinServer = seen.length
    const containers = new ApiContainers(api())
    const result = await containers.exec('abc', ['cat'], {stdin: 'some input'})
    expect(result).toEqual({exitCode: 0, stdout: 'got: some input', stderr: ''})
    expect(seen.slice(stdinServer).some((s) => s.url === '/exec/e2/start')).toBe(true)
  })

  it('waits for an exit code the engine records just after the stream ends', async () => {
    const result = await new ApiContainers(api()).exec('late', ['true'], {})
    expect(result).toEqual({exitCode: 5, stdout: 'partial', stderr: ''})
    expect(lateLooks).toBe(3)
  })

  it('reports an output that ended while the process still runs, instead of making up an exit code', async () => {
    const error = await new ApiContainers(api()).exec('cut', ['sleep', '9'], {}).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SandboxError)
    expect((error as SandboxError).message).toBe('the command was still running when its output ended, so its exit code is unknown')
    expect((error as SandboxError).exitCode).toBe(1)
  })

  it('creates a missing volume with its labels', async () => {
    const info = await new ApiVolumes(api()).ensure('newvol', {'dev.agent-sandbox.managed': 'true'})
    expect(info).toEqual({name: 'newvol', labels: {'dev.agent-sandbox.managed': 'true'}, mountpoint: '/m'})
  })
})

describe('demultiplex', () => {
  it('routes frames to stdout and stderr across chunk boundaries, and resolves at the end', async () => {
    const stream = new PassThrough()
    const out: string[] = []
    const err: string[] = []
    const done = demultiplex(
      stream,
      (c) => out.push(c.toString()),
      (c) => err.push(c.toString()),
    )
    const bytes = Buffer.concat([frame(1, 'a'), frame(2, 'b'), frame(1, 'cd')])
    for (const byte of bytes) stream.write(Buffer.from([byte]))
    stream.end()
    await done
    expect(out.join('')).toBe('acd')
    expect(err.join('')).toBe('b')
  })
})
