/** Classifies failures to reach the engine into one-line EngineErrors with a hint. */
import {EngineError, isTlsFailure} from '../errors.js'
import type {Endpoint} from './endpoint.js'

const where = (endpoint: Endpoint) => (endpoint.kind === 'socket' || endpoint.kind === 'pipe' ? endpoint.socketPath : endpoint.dockerHost)

/** Turn a low-level connection failure into a one-line EngineError with a hint. */
export function classifyEngineError(error: unknown, endpoint: Endpoint): EngineError {
  if (error instanceof EngineError) return error
  const code = (error as {code?: string} | undefined)?.code
  const at = where(endpoint)
  if (isTlsFailure(code)) {
    const message = error instanceof Error ? error.message : String(code)
    return new EngineError('tls', `the TLS handshake with the container engine at ${at} failed: ${firstLine(message)}`, {
      cause: error,
      hint: "give the engine's CA as ca.pem in DOCKER_CERT_PATH (with cert.pem and key.pem), or add it to the file NODE_EXTRA_CA_CERTS names",
    })
  }
  switch (code) {
    case 'ENOENT':
      return new EngineError('socket-not-found', `no container engine socket at ${at}`, {
        cause: error,
        hint: 'start Docker (e.g. `sudo systemctl start docker`) or Podman (`systemctl --user start podman.socket`), or set DOCKER_HOST',
      })
    case 'EACCES':
    case 'EPERM':
      return new EngineError('permission-denied', `permission denied on the engine socket ${at}`, {
        cause: error,
        hint: 'add yourself to the docker group (`sudo usermod -aG docker $USER`, then log in again) or use rootless Podman',
      })
    case 'ECONNREFUSED':
    case 'ECONNRESET':
    case 'EHOSTUNREACH':
    case 'ENOTFOUND':
    case 'ETIMEDOUT':
      return new EngineError('connection-refused', `the container engine at ${at} refused the connection (${code})`, {
        cause: error,
        hint: 'check that the engine is running (`docker info`) and that DOCKER_HOST is right',
      })
    case 'ESSHAUTH':
      return new EngineError('permission-denied', `ssh could not log in to the engine's host for ${at}: ${firstLine((error as Error).message)}`, {
        cause: error,
        hint: `check that \`ssh ${sshDestination(endpoint)} docker version\` works without a prompt (your key loaded, the host in known_hosts)`,
      })
    default: {
      const message = error instanceof Error ? error.message : String(error)
      return new EngineError('unhealthy', `the container engine at ${at} is not healthy: ${firstLine(message)}`, {
        cause: error,
        hint: 'check `docker info`; restart the engine if it does not answer',
      })
    }
  }
}

function sshDestination(endpoint: Endpoint): string {
  if (endpoint.kind !== 'ssh') return endpoint.dockerHost
  return `${endpoint.username ? `${endpoint.username}@` : ''}${endpoint.host}${endpoint.port === 22 ? '' : ` -p ${endpoint.port}`}`
}

function firstLine(text: string): string {
  return text.split('\n')[0].slice(0, 200)
}

/** A failure to reach the engine (an errno or TLS code), not an answer from it (which has a statusCode). Pure. */
export function isConnectionError(error: unknown): boolean {
  const code = (error as {code?: string} | undefined)?.code
  return typeof code === 'string' && (/^E[A-Z]+$/.test(code) || isTlsFailure(code)) && (error as {statusCode?: number}).statusCode === undefined
}
