/**
 * Builds the one dockerode client for this process and classifies failures to
 * reach it. dockerode is imported lazily so that --help and --version never load it.
 */
import type Dockerode from 'dockerode'
import {EngineError, isTlsFailure} from '../errors.js'
import {certs} from './api.js'
import type {Endpoint} from './endpoint.js'
import {lazyImport} from '../lazy-import.js'

export async function createDockerode(endpoint: Endpoint): Promise<Dockerode> {
  const {default: Docker} = await lazyImport<{default: typeof import('dockerode')}>('dockerode')
  switch (endpoint.kind) {
    case 'socket':
    case 'pipe':
      return new Docker({socketPath: endpoint.socketPath})
    case 'http':
      return new Docker({protocol: endpoint.protocol, host: endpoint.host, port: endpoint.port, ...(endpoint.protocol === 'https' ? certs() : {})})
    case 'ssh':
      return new Docker({protocol: 'ssh', host: endpoint.host, port: endpoint.port, username: endpoint.username})
  }
}

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
    default: {
      const message = error instanceof Error ? error.message : String(error)
      return new EngineError('unhealthy', `the container engine at ${at} is not healthy: ${firstLine(message)}`, {
        cause: error,
        hint: 'check `docker info`; restart the engine if it does not answer',
      })
    }
  }
}

function firstLine(text: string): string {
  return text.split('\n')[0].slice(0, 200)
}
