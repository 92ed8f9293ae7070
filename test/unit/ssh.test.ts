import {describe, expect, it} from 'vitest'
import {classifyEngineError} from '../../src/lib/engine/connect.js'
import {parseDockerHost} from '../../src/lib/engine/endpoint.js'
import {sshArgv, sshFailureCode} from '../../src/lib/engine/ssh.js'

describe('ssh:// engines', () => {
  it('runs docker system dial-stdio on the host, in batch mode (never a prompt)', () => {
    expect(sshArgv({host: 'build.example', port: 2222, username: 'me'})).toEqual(['-o', 'BatchMode=yes', '-p', '2222', '--', 'me@build.example', 'docker', 'system', 'dial-stdio'])
    expect(sshArgv({host: 'build.example', port: 22})).toEqual(['-o', 'BatchMode=yes', '-p', '22', '--', 'build.example', 'docker', 'system', 'dial-stdio'])
  })

  it("turns ssh's own messages into errno-like codes", () => {
    expect(sshFailureCode('ssh: connect to host 127.0.0.1 port 1: Connection refused')).toBe('ECONNREFUSED')
    expect(sshFailureCode('ssh: Could not resolve hostname nowhere: Name or service not known')).toBe('ENOTFOUND')
    expect(sshFailureCode('root@127.0.0.1: Permission denied (publickey).')).toBe('ESSHAUTH')
    expect(sshFailureCode('Host key verification failed.')).toBe('ESSHAUTH')
    expect(sshFailureCode('ssh: connect to host 10.0.0.1 port 22: Connection timed out')).toBe('ETIMEDOUT')
    expect(sshFailureCode('bash: docker: command not found')).toBe('ESSH')
  })

  it('says in one line what to check when ssh cannot log in', () => {
    const endpoint = parseDockerHost('ssh://me@build.example:2222')
    const error = classifyEngineError(Object.assign(new Error('ssh: me@build.example: Permission denied (publickey).'), {code: 'ESSHAUTH'}), endpoint)
    expect(error.exitCode).toBe(3)
    expect(error.message).toBe("ssh could not log in to the engine's host for ssh://me@build.example:2222: ssh: me@build.example: Permission denied (publickey).")
    expect(error.hint).toBe('check that `ssh me@build.example -p 2222 docker version` works without a prompt (your key loaded, the host in known_hosts)')
  })
})
