import {describe, expect, it, vi} from 'vitest'
import {stopSandbox} from '../../src/lib/sandbox/stop.js'
import {Names, type Workspace} from '../../src/lib/workspace.js'
import {fakeEngine} from './fake-engine.js'

const ws: Workspace = {path: '/src/app', repoName: 'app', repoSlug: 'app', hash: '0123456789abcdef0123456789abcdef', uid: 1000, gid: 1000}

describe('stopSandbox', () => {
  it('stops the sandbox and signals its gate and gateway (SIGTERM, which the engine does not wait for)', async () => {
    const order: string[] = []
    const stop = vi.fn(async (name: string) => {
      order.push(`stop ${name}`)
      return 'stopped' as const
    })
    const kill = vi.fn(async (name: string, signal?: string) => {
      order.push(`kill ${name} ${signal}`)
    })
    const name = Names.container(ws)
    expect(await stopSandbox({engine: fakeEngine({containers: {stop, kill}})}, ws)).toBe('stopped')
    // All three asked at once; the sidecars with SIGTERM: the engine waits for the exit after a SIGKILL, not after this.
    expect(order).toEqual([`stop ${name}`, `kill ${Names.gate(name)} SIGTERM`, `kill ${Names.gateway(name)} SIGTERM`])
  })

  it('says what the sandbox was, and still signals leftover sidecars', async () => {
    const kill = vi.fn(async () => undefined)
    const engine = fakeEngine({containers: {stop: async () => 'not-running' as const, kill}})
    expect(await stopSandbox({engine}, ws, 'feat')).toBe('not-running')
    expect(kill).toHaveBeenCalledTimes(2)
  })
})
