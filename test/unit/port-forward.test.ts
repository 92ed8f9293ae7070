import {connect, createServer, type AddressInfo} from 'node:net'
import type {Readable} from 'node:stream'
import {describe, expect, it, vi} from 'vitest'
import type {ExecOptions} from '../../src/lib/engine/containers.js'
import type {ExecResult} from '../../src/lib/engine/index.js'
import {forwardPorts, parsePortSpec, relayProgram} from '../../src/lib/sandbox/port-forward.js'
import {containerInfo, fakeEngine} from './fake-engine.js'

describe('parsePortSpec', () => {
  it('reads PORT, HOST:SANDBOX and 0:SANDBOX', () => {
    expect(parsePortSpec('3000')).toEqual({host: 3000, container: 3000})
    expect(parsePortSpec('8080:3000')).toEqual({host: 8080, container: 3000})
    expect(parsePortSpec('0:5173')).toEqual({host: 0, container: 5173})
  })

  it('refuses what is not a port', () => {
    for (const bad of ['', 'abc', '0', '70000', '8080:0', '1:2:3', ':3000', '3000:', '-1', '80.5']) expect(() => parsePortSpec(bad), bad).toThrow(/not a port to forward/)
  })
})

describe('forwardPorts, on a fake engine whose exec echoes its input', () => {
  /** An exec that writes back what it reads, then ends (as the relay does when its port's side ends). */
  const echoExec = vi.fn(async (_id: string, _cmd: string[], options: ExecOptions = {}): Promise<ExecResult> => {
    const input = options.stdin as Readable
    await new Promise<void>((resolve) => {
      input.on('data', (chunk: Buffer) => options.stdout?.write(chunk))
      input.on('end', resolve)
      input.on('close', resolve)
    })
    return {exitCode: 0, stdout: '', stderr: ''}
  })
  const running = vi.fn(async (name: string) => containerInfo({name, id: 'cid', running: true}))

  it('relays each connection by one exec of the relay on the sandbox\'s port, concurrently, and stops listening on abort', async () => {
    const controller = new AbortController()
    const engine = fakeEngine({containers: {inspect: running, exec: echoExec}})
    const forwarding = await forwardPorts({engine, signal: controller.signal}, 'sbx', [{host: 0, container: 3000}], {start: 'agent-sandbox start'})
    const [{host}] = forwarding.bound
    expect(host).toBeGreaterThan(0)
    const talk = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(host, '127.0.0.1', () => socket.end(text))
        let got = ''
        socket.on('data', (d) => (got += d))
        socket.on('end', () => resolve(got))
        socket.on('error', reject)
      })
    expect(await Promise.all([talk('one'), talk('two')])).toEqual(['one', 'two'])
    expect(echoExec).toHaveBeenCalledTimes(2)
    expect(echoExec.mock.calls[0].slice(0, 2)).toEqual(['cid', ['node', '-e', relayProgram(), '3000']])
    controller.abort()
    await forwarding.closed
    await expect(talk('three')).rejects.toThrow(/ECONNREFUSED/)
  })

  it('refuses a sandbox that is not running, and a host port in use, leaving nothing listening', async () => {
    const stopped = fakeEngine({containers: {inspect: vi.fn(async (name: string) => containerInfo({name}))}})
    await expect(forwardPorts({engine: stopped}, 'sbx', [{host: 0, container: 1}], {start: 'agent-sandbox start /w'})).rejects.toThrow(/sandbox sbx is not running/)
    const busy = createServer().listen(0, '127.0.0.1')
    await new Promise((resolve) => busy.once('listening', resolve))
    const port = (busy.address() as AddressInfo).port
    const engine = fakeEngine({containers: {inspect: running}})
    await expect(forwardPorts({engine}, 'sbx', [{host: 0, container: 1}, {host: port, container: 2}], {start: ''})).rejects.toThrow(new RegExp(`127.0.0.1:${port}: the port is in use`))
    busy.close()
  })
})
