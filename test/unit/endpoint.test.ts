import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {afterEach, beforeEach, describe, expect, it, vi} from 'vitest'
import {classifyEngineError} from '../../src/lib/engine/connect.js'
import {currentContextHost} from '../../src/lib/engine/context.js'
import {discoverEndpoint, parseDockerHost} from '../../src/lib/engine/endpoint.js'
import {EngineError, UsageError} from '../../src/lib/errors.js'

describe('parseDockerHost', () => {
  it('parses unix:// sockets', () => {
    expect(parseDockerHost('unix:///var/run/docker.sock')).toEqual({
      kind: 'socket',
      socketPath: '/var/run/docker.sock',
      dockerHost: 'unix:///var/run/docker.sock',
    })
  })

  it('trims surrounding white space', () => {
    expect(parseDockerHost('  unix:///tmp/d.sock\n')).toMatchObject({kind: 'socket', socketPath: '/tmp/d.sock'})
  })

  it('treats a bare absolute path as a unix socket', () => {
    expect(parseDockerHost('/run/user/1000/podman/podman.sock')).toEqual({
      kind: 'socket',
      socketPath: '/run/user/1000/podman/podman.sock',
      dockerHost: 'unix:///run/user/1000/podman/podman.sock',
    })
  })

  it('parses npipe:// into a Windows pipe path', () => {
    expect(parseDockerHost('npipe:////./pipe/docker_engine')).toEqual({
      kind: 'pipe',
      socketPath: '\\\\.\\pipe\\docker_engine',
      dockerHost: 'npipe:////./pipe/docker_engine',
    })
  })

  it('parses //./pipe/x', () => {
    expect(parseDockerHost('//./pipe/x')).toEqual({kind: 'pipe', socketPath: '\\\\.\\pipe\\x', dockerHost: 'npipe:////./pipe/x'})
  })

  it('parses \\\\.\\pipe\\x', () => {
    expect(parseDockerHost('\\\\.\\pipe\\x')).toEqual({kind: 'pipe', socketPath: '\\\\.\\pipe\\x', dockerHost: 'npipe:////./pipe/x'})
  })

  it('maps tcp:// to plain http with the given port', () => {
    expect(parseDockerHost('tcp://host:2375')).toEqual({kind: 'http', protocol: 'http', host: 'host', port: 2375, dockerHost: 'tcp://host:2375'})
    expect(parseDockerHost('tcp://10.0.0.5:4243')).toMatchObject({protocol: 'http', host: '10.0.0.5', port: 4243})
  })

  it('defaults tcp:// to port 2375 without TLS and 2376 with DOCKER_TLS_VERIFY', () => {
    expect(parseDockerHost('tcp://host')).toMatchObject({protocol: 'http', port: 2375})
    expect(parseDockerHost('tcp://host', {DOCKER_TLS_VERIFY: '1'})).toMatchObject({protocol: 'https', port: 2376})
    expect(parseDockerHost('tcp://host:9999', {DOCKER_TLS_VERIFY: '1'})).toMatchObject({protocol: 'https', port: 9999})
  })

  it('does not treat DOCKER_TLS_VERIFY=0/false/empty as TLS', () => {
    for (const value of ['0', 'false', 'FALSE', '']) {
      expect(parseDockerHost('tcp://host', {DOCKER_TLS_VERIFY: value})).toMatchObject({protocol: 'http', port: 2375})
    }
  })

  it('parses http:// and https://', () => {
    expect(parseDockerHost('http://engine.local:8080')).toMatchObject({kind: 'http', protocol: 'http', host: 'engine.local', port: 8080})
    expect(parseDockerHost('https://engine.local')).toMatchObject({kind: 'http', protocol: 'https', host: 'engine.local', port: 2376})
    expect(parseDockerHost('https://engine.local:3000')).toMatchObject({protocol: 'https', port: 3000})
  })

  it('parses ssh:// with user and port', () => {
    expect(parseDockerHost('ssh://user@host:2222')).toEqual({
      kind: 'ssh',
      host: 'host',
      port: 2222,
      username: 'user',
      dockerHost: 'ssh://user@host:2222',
    })
    const plain = parseDockerHost('ssh://host')
    expect(plain).toMatchObject({kind: 'ssh', host: 'host', port: 22})
    expect(plain.kind === 'ssh' && plain.username).toBeUndefined()
  })

  it('strips the brackets of IPv6 hosts', () => {
    expect(parseDockerHost('tcp://[::1]:2375')).toMatchObject({kind: 'http', host: '::1', port: 2375})
    expect(parseDockerHost('ssh://me@[fe80::1]:22')).toMatchObject({kind: 'ssh', host: 'fe80::1', username: 'me'})
  })

  it.each(['ftp://x', '', '   ', 'unix://', 'npipe://', 'garbage', 'tcp://', 'tcp://:2375', 'tcp://host:99999', 'host:2375'])(
    'rejects %j with a UsageError and a hint',
    (value) => {
      let caught: unknown
      try {
        parseDockerHost(value)
      } catch (error) {
        caught = error
      }
      expect(caught).toBeInstanceOf(UsageError)
      const error = caught as UsageError
      expect(error.message).toMatch(/DOCKER_HOST/)
      expect(error.hint).toBeTruthy()
      expect(error.exitCode).toBe(2)
    },
  )

  it('names the bad value in the message', () => {
    expect(() => parseDockerHost('ftp://x')).toThrow(/"ftp:\/\/x"/)
  })
})

describe('discoverEndpoint', () => {
  const env = {XDG_RUNTIME_DIR: '/run/user/4242'}
  const existsOnly = (...paths: string[]) => vi.fn((path: string) => paths.includes(path))

  it('prefers DOCKER_HOST over the context and sockets', () => {
    const contextHost = vi.fn(() => 'unix:///ctx.sock')
    const exists = vi.fn(() => true)
    const choice = discoverEndpoint({...env, DOCKER_HOST: 'tcp://remote:2375'}, contextHost, exists)
    expect(choice.source).toBe('DOCKER_HOST')
    expect(choice.endpoint).toMatchObject({kind: 'http', host: 'remote', port: 2375})
    expect(contextHost).not.toHaveBeenCalled()
    expect(exists).not.toHaveBeenCalled()
  })

  it('passes DOCKER_TLS_VERIFY through to DOCKER_HOST parsing', () => {
    const choice = discoverEndpoint({DOCKER_HOST: 'tcp://remote', DOCKER_TLS_VERIFY: '1'}, () => undefined, () => false)
    expect(choice.endpoint).toMatchObject({protocol: 'https', port: 2376})
  })

  it('ignores an empty DOCKER_HOST and uses the docker context', () => {
    const exists = vi.fn(() => true)
    const choice = discoverEndpoint({...env, DOCKER_HOST: ''}, () => 'unix:///Users/me/.colima/default/docker.sock', exists)
    expect(choice).toEqual({
      source: 'docker context',
      endpoint: {kind: 'socket', socketPath: '/Users/me/.colima/default/docker.sock', dockerHost: 'unix:///Users/me/.colima/default/docker.sock'},
    })
    expect(exists).not.toHaveBeenCalled()
  })

  it('propagates a bad context host as a UsageError', () => {
    expect(() => discoverEndpoint(env, () => 'bogus', () => true)).toThrow(UsageError)
  })

  it('picks /var/run/docker.sock first when it exists', () => {
    const choice = discoverEndpoint(env, () => undefined, existsOnly('/var/run/docker.sock', '/run/user/4242/podman/podman.sock'))
    expect(choice.source).toBe('default socket')
    expect(choice.endpoint).toEqual({kind: 'socket', socketPath: '/var/run/docker.sock', dockerHost: 'unix:///var/run/docker.sock'})
  })

  it('then the rootless podman socket under XDG_RUNTIME_DIR', () => {
    const choice = discoverEndpoint(env, () => undefined, existsOnly('/run/user/4242/podman/podman.sock', '/run/podman/podman.sock'))
    expect(choice.source).toBe('default socket')
    expect(choice.endpoint).toMatchObject({socketPath: '/run/user/4242/podman/podman.sock'})
  })

  it('then the rootful podman socket', () => {
    const exists = existsOnly('/run/podman/podman.sock')
    const choice = discoverEndpoint(env, () => undefined, exists)
    expect(choice.endpoint).toMatchObject({socketPath: '/run/podman/podman.sock', dockerHost: 'unix:///run/podman/podman.sock'})
    expect(exists.mock.calls.map(([p]) => p).slice(0, 3)).toEqual([
      '/var/run/docker.sock',
      '/run/user/4242/podman/podman.sock',
      '/run/podman/podman.sock',
    ])
  })

  it('falls back to /var/run/docker.sock when no socket exists', () => {
    const exists = vi.fn(() => false)
    const choice = discoverEndpoint(env, () => undefined, exists)
    expect(choice).toEqual({source: 'fallback', endpoint: {kind: 'socket', socketPath: '/var/run/docker.sock', dockerHost: 'unix:///var/run/docker.sock'}})
    expect(exists.mock.calls.length).toBeGreaterThanOrEqual(3)
  })
})

describe('currentContextHost', () => {
  let dir: string
  const writeContext = (name: string, host: string | undefined) => {
    const id = createHash('sha256').update(name).digest('hex')
    const metaDir = join(dir, 'contexts', 'meta', id)
    mkdirSync(metaDir, {recursive: true})
    writeFileSync(join(metaDir, 'meta.json'), JSON.stringify({Name: name, Endpoints: {docker: host === undefined ? {} : {Host: host}}}))
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'agent-sandbox-ctx-'))
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  it('reads the current context from config.json and its meta.json', () => {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({currentContext: 'colima'}))
    writeContext('colima', 'unix:///Users/me/.colima/default/docker.sock')
    expect(currentContextHost({DOCKER_CONFIG: dir})).toBe('unix:///Users/me/.colima/default/docker.sock')
  })

  it('lets DOCKER_CONTEXT override config.json', () => {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({currentContext: 'colima'}))
    writeContext('colima', 'unix:///colima.sock')
    writeContext('remote', 'ssh://me@box')
    expect(currentContextHost({DOCKER_CONFIG: dir, DOCKER_CONTEXT: 'remote'})).toBe('ssh://me@box')
  })

  it('uses DOCKER_CONTEXT even without a config.json', () => {
    writeContext('remote', 'tcp://box:2375')
    expect(currentContextHost({DOCKER_CONFIG: dir, DOCKER_CONTEXT: 'remote'})).toBe('tcp://box:2375')
  })

  it('returns undefined for the default context', () => {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({currentContext: 'default'}))
    writeContext('default', 'unix:///should-not-be-used.sock')
    expect(currentContextHost({DOCKER_CONFIG: dir})).toBeUndefined()
    expect(currentContextHost({DOCKER_CONFIG: dir, DOCKER_CONTEXT: 'default'})).toBeUndefined()
  })

  it('returns undefined when files are missing or incomplete', () => {
    expect(currentContextHost({DOCKER_CONFIG: dir})).toBeUndefined()
    writeFileSync(join(dir, 'config.json'), JSON.stringify({currentContext: 'colima'}))
    expect(currentContextHost({DOCKER_CONFIG: dir})).toBeUndefined()
    writeContext('colima', undefined)
    expect(currentContextHost({DOCKER_CONFIG: dir})).toBeUndefined()
    writeFileSync(join(dir, 'config.json'), '{not json')
    expect(currentContextHost({DOCKER_CONFIG: dir})).toBeUndefined()
    writeFileSync(join(dir, 'config.json'), JSON.stringify({auths: {}}))
    expect(currentContextHost({DOCKER_CONFIG: dir})).toBeUndefined()
  })
})

describe('classifyEngineError', () => {
  const socket = parseDockerHost('unix:///var/run/docker.sock')
  const remote = parseDockerHost('tcp://box:2375')
  const errno = (code: string) => Object.assign(new Error(`connect ${code} /var/run/docker.sock`), {code})

  it.each([
    ['ENOENT', 'socket-not-found', /no container engine socket at \/var\/run\/docker\.sock/],
    ['EACCES', 'permission-denied', /permission denied on the engine socket \/var\/run\/docker\.sock/],
    ['EPERM', 'permission-denied', /permission denied/],
    ['ECONNREFUSED', 'connection-refused', /refused the connection \(ECONNREFUSED\)/],
    ['ETIMEDOUT', 'connection-refused', /\(ETIMEDOUT\)/],
    ['EWHATEVER', 'unhealthy', /is not healthy: connect EWHATEVER/],
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'tls', /the TLS handshake with the container engine at \/var\/run\/docker\.sock failed: connect UNABLE_TO_VERIFY/],
    ['SELF_SIGNED_CERT_IN_CHAIN', 'tls', /TLS handshake with the container engine .* failed/],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'tls', /TLS handshake with the container engine .* failed/],
    ['CERT_HAS_EXPIRED', 'tls', /TLS handshake with the container engine .* failed/],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'tls', /TLS handshake with the container engine .* failed/],
    ['ERR_SSL_WRONG_VERSION_NUMBER', 'tls', /TLS handshake with the container engine .* failed/],
  ])('%s → %s', (code, kind, message) => {
    const cause = errno(code)
    const error = classifyEngineError(cause, socket)
    expect(error).toBeInstanceOf(EngineError)
    expect(error.kind).toBe(kind)
    expect(error.message).toMatch(message)
    expect(error.message).not.toContain('\n')
    expect(error.hint).toBeTruthy()
    expect(error.hint).not.toContain('\n')
    expect(error.cause).toBe(cause)
    expect(error.exitCode).toBe(3)
  })

  it('gives each kind a distinct hint', () => {
    const hints = ['ENOENT', 'EACCES', 'ECONNREFUSED', 'EOTHER', 'CERT_HAS_EXPIRED'].map((code) => classifyEngineError(errno(code), socket).hint)
    expect(new Set(hints).size).toBe(5)
  })

  it('names DOCKER_HOST for a remote endpoint', () => {
    expect(classifyEngineError(errno('ECONNREFUSED'), remote).message).toContain('tcp://box:2375')
  })

  it('keeps only the first line of an unhealthy message, and handles non-Errors', () => {
    const error = classifyEngineError(new Error('500 server error\nstack\nmore'), socket)
    expect(error.kind).toBe('unhealthy')
    expect(error.message).toMatch(/not healthy: 500 server error$/)
    expect(classifyEngineError('plain string', socket).message).toMatch(/plain string$/)
    expect(classifyEngineError(undefined, socket).kind).toBe('unhealthy')
  })

  it('returns an EngineError unchanged', () => {
    const original = new EngineError('unsupported', 'too old')
    expect(classifyEngineError(original, socket)).toBe(original)
  })
})
