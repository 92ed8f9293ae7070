import {describe, expect, it} from 'vitest'
import {redact} from '../../src/cli/output.js'
import {isNotRunning} from '../../src/lib/engine/containers.js'
import {execArgs} from '../../src/lib/sandbox/session.js'

describe('execArgs', () => {
  it('builds a non-TTY exec through sandbox-exec as node', () => {
    expect(execArgs('agent-sandbox-repo-abc', ['claude', '--help'], {tty: false})).toEqual([
      'exec',
      '--interactive',
      '--user',
      'node',
      'agent-sandbox-repo-abc',
      '/usr/local/bin/sandbox-exec',
      'claude',
      '--help',
    ])
  })

  it('adds --tty and env when asked', () => {
    const args = execArgs('box', ['bash', '-l'], {tty: true, env: {TERM: 'xterm-256color', A: 'x y'}})
    expect(args).toEqual(['exec', '--interactive', '--tty', '--user', 'node', '--env', 'TERM=xterm-256color', '--env', 'A=x y', 'box', '/usr/local/bin/sandbox-exec', 'bash', '-l'])
  })

  it('passes command words through untouched', () => {
    const command = ['sh', '-c', 'echo "$(touch /tmp/x)" && ls my dir', "it's", '', 'naïve ✓']
    const args = execArgs('box', command, {tty: false})
    expect(args.slice(args.indexOf('/usr/local/bin/sandbox-exec') + 1)).toEqual(command)
    expect(args.indexOf('box')).toBe(args.indexOf('/usr/local/bin/sandbox-exec') - 1)
  })
})

describe('redact', () => {
  it('masks every occurrence of each secret', () => {
    expect(redact('token=sk-123456 again sk-123456', ['sk-123456'])).toBe('token=*** again ***')
    expect(redact('a=hunter22 b=s3cr3t!', ['hunter22', 's3cr3t!'])).toBe('a=*** b=***')
  })

  it('treats secrets literally, not as patterns', () => {
    expect(redact('x=a.b*c+d y=aXbbbcd', ['a.b*c+d'])).toBe('x=*** y=aXbbbcd')
    expect(redact('v=$(id)', ['$(id)'])).toBe('v=***')
  })

  it('ignores secrets shorter than 4 characters and empty lists', () => {
    expect(redact('abc ab a', ['abc', 'ab', 'a', ''])).toBe('abc ab a')
    expect(redact('abcd', ['abcd'])).toBe('***')
    expect(redact('nothing', [])).toBe('nothing')
  })
})

describe('isNotRunning', () => {
  const error = (statusCode: number, message: string) => Object.assign(new Error(message), {statusCode})
  it('recognises a missing or stopped container on Docker and Podman, and nothing else', () => {
    expect(isNotRunning(error(404, 'No such container: x'))).toBe(true)
    expect(isNotRunning(error(409, 'Container abc is not running'))).toBe(true)
    expect(isNotRunning(error(500, '(HTTP code 500) can only create exec sessions on running containers: container state improper (POST /containers/x/exec)'))).toBe(true)
    expect(isNotRunning(error(500, 'OCI runtime exec failed'))).toBe(false)
    expect(isNotRunning(Object.assign(new Error('connect ENOENT'), {code: 'ENOENT'}))).toBe(false)
  })
})
