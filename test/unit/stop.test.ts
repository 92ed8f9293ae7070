import {describe, expect, it, vi} from 'vitest'
import {stopSandbox} from '../../src/lib/sandbox/stop.js'
import {Names, type Workspace} from '../../src/lib/workspace.js'
import {fakeEngine} from './fake-engine.js'

const ws: Workspace = {path: '/src/app', repoName: 'app', repoSlug: 'app', hash: '0123456789abcdef0123456789abcdef', uid: 1000, gid: 1000}

describe('stopSandbox', () => {
  it('stops the sandbox, then signals its gate and gateway (SIGTERM, without waiting for the engine\'s answer)', async () => {
    const order: string[] = []
    let stopped = (): void => undefined
    const stop = vi.fn(
      (name: string) =>
        new Promise<'stopped'>((resolve) => {
          order.push(`stop ${name}`)
          stopped = () => {
            order.push('stop returned')
            resolve('stopped')
          }
        }),
    )
    const kill = vi.fn(async (name: string, signal?: string, options?: {answer?: boolean}) => {
      order.push(`kill ${name} ${signal} answer=${options?.answer}`)
    })
    const name = Names.container(ws)
    const done = stopSandbox({engine: fakeEngine({containers: {stop, kill}})}, ws)
    await new Promise((r) => setTimeout(r, 10))
    // Nothing else is asked while the stop the user waits for is under way.
    expect(kill).not.toHaveBeenCalled()
    stopped()
    expect(await done).toBe('stopped')
    expect(order).toEqual([`stop ${name}`, 'stop returned', `kill ${Names.gate(name)} SIGTERM answer=false`, `kill ${Names.gateway(name)} SIGTERM answer=false`])
  })

  it('says what the sandbox was, and still signals leftover sidecars', async () => {
    const kill = vi.fn(async () => undefined)
    const engine = fakeEngine({containers: {stop: async () => 'not-running' as const, kill}})
    expect(await stopSandbox({engine}, ws, 'feat')).toBe('not-running')
    expect(kill).toHaveBeenCalledTimes(2)
  })
})
