import {describe, expect, it} from 'vitest'
import {CommandFailedError} from '../../src/lib/errors.js'
import {endChildren, liveChildren, signalExitCode} from '../../src/lib/util/children.js'
import {run} from '../../src/lib/util/proc.js'

describe('run', () => {
  it('captures stdout and stderr as they are, and the exit code', async () => {
    const r = await run('sh', ['-c', 'printf "out\\n\\n"; printf err >&2; exit 3'], {allowFailure: true})
    expect(r).toEqual({exitCode: 3, stdout: 'out\n\n', stderr: 'err', signal: undefined})
  })

  it('throws a CommandFailedError naming the command, its code and the last stderr line', async () => {
    const error = await run('sh', ['-c', 'echo first >&2; echo "the reason" >&2; exit 7']).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CommandFailedError)
    expect((error as CommandFailedError).code).toBe(7)
    expect((error as CommandFailedError).message).toBe('sh -c echo first >&2; echo "the reason" >&2; exit 7 failed (exit 7): the reason')
  })

  it('passes input on stdin, and ends it', async () => {
    const r = await run('sh', ['-c', 'cat; echo done'], {input: 'from stdin\n'})
    expect(r.stdout).toBe('from stdin\ndone\n')
  })

  it('gives the child no stdin by default, so a reader sees end of file at once', async () => {
    const r = await run('sh', ['-c', 'cat; echo eof'])
    expect(r.stdout).toBe('eof\n')
  })

  it('adds to the environment, and removes variables set to undefined', async () => {
    process.env.AGENT_SANDBOX_PROC_TEST_KEEP = 'kept'
    process.env.AGENT_SANDBOX_PROC_TEST_DROP = 'dropped'
    try {
      const r = await run('sh', ['-c', 'echo "$AGENT_SANDBOX_PROC_TEST_KEEP ${AGENT_SANDBOX_PROC_TEST_DROP-unset} $EXTRA"'], {
        env: {EXTRA: 'added', AGENT_SANDBOX_PROC_TEST_DROP: undefined},
      })
      expect(r.stdout).toBe('kept unset added\n')
    } finally {
      delete process.env.AGENT_SANDBOX_PROC_TEST_KEEP
      delete process.env.AGENT_SANDBOX_PROC_TEST_DROP
    }
  })

  it('runs in the given directory', async () => {
    const r = await run('pwd', [], {cwd: '/'})
    expect(r.stdout).toBe('/\n')
  })

  it('says "command not found" with a hint when the binary does not exist', async () => {
    const error = await run('agent-sandbox-no-such-binary', ['x']).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CommandFailedError)
    expect((error as CommandFailedError).message).toBe('agent-sandbox-no-such-binary failed: agent-sandbox-no-such-binary: command not found')
    expect((error as CommandFailedError).hint).toMatch(/install agent-sandbox-no-such-binary/)
  })

  it('kills the child at the timeout and reports the signal (exit 128 + 15)', async () => {
    const r = await run('sleep', ['30'], {timeoutMs: 200, allowFailure: true})
    expect(r.signal).toBe('SIGTERM')
    expect(r.exitCode).toBe(143)
  })

  it('kills with SIGKILL a child that ignores SIGTERM', async () => {
    const r = await run('sh', ['-c', 'trap "" TERM; exec sleep 30'], {timeoutMs: 200, allowFailure: true})
    expect(r.signal).toBe('SIGKILL')
  })

  it('hands each chunk of output to onOutput while capturing it', async () => {
    const written: string[] = []
    const r = await run('sh', ['-c', 'echo step-1; echo step-2 >&2'], {onOutput: (chunk) => written.push(chunk.toString())})
    expect(r.stdout).toBe('step-1\n')
    expect(written.join('')).toContain('step-1\n')
    expect(written.join('')).toContain('step-2\n')
  })

  it('ends the child when its signal is aborted, and registers it only while it runs', async () => {
    const controller = new AbortController()
    const running = run('sh', ['-c', 'exec sleep 30'], {signal: controller.signal, allowFailure: true})
    await new Promise((r) => setTimeout(r, 100))
    expect(liveChildren.size).toBe(1)
    controller.abort()
    expect(await running).toMatchObject({signal: 'SIGTERM', exitCode: 143})
    expect(liveChildren.size).toBe(0)
  })

  it('endChildren ends every child still running (the command layer calls it at exit)', async () => {
    const running = run('sh', ['-c', 'exec sleep 30'], {allowFailure: true})
    await new Promise((r) => setTimeout(r, 100))
    endChildren()
    expect(await running).toMatchObject({signal: 'SIGTERM'})
  })
})

describe('a child killed by a signal', () => {
  it('exits 128 + the signal number, as a shell reports it (SIGKILL: 137, SIGTERM: 143)', async () => {
    const killed = await run('sh', ['-c', 'kill -KILL $$'], {allowFailure: true})
    expect(killed).toMatchObject({exitCode: 137, signal: 'SIGKILL'})
    const termed = await run('sh', ['-c', 'kill -TERM $$'], {allowFailure: true})
    expect(termed).toMatchObject({exitCode: 143, signal: 'SIGTERM'})
  })
})

describe('signalExitCode', () => {
  it('is 128 + the signal number, for children and for our own interrupts alike', () => {
    expect(signalExitCode('SIGINT')).toBe(130)
    expect(signalExitCode('SIGPIPE')).toBe(141)
    expect(signalExitCode('SIGTERM')).toBe(143)
  })
})
