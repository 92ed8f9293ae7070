/**
 * Where the container engine listens: DOCKER_HOST parsing and socket discovery.
 * Pure apart from `discoverEndpoint`, which only checks which sockets exist.
 */
import {existsSync} from 'node:fs'
import {homedir} from 'node:os'
import {join} from 'node:path'
import {UsageError} from '../errors.js'

export type Endpoint =
  | {kind: 'socket'; socketPath: string; dockerHost: string}
  | {kind: 'pipe'; socketPath: string; dockerHost: string}
  | {kind: 'http'; protocol: 'http' | 'https'; host: string; port: number; dockerHost: string}
  | {kind: 'ssh'; host: string; port: number; username?: string; dockerHost: string}

/** Parse a DOCKER_HOST value into an endpoint. Throws UsageError on anything else. */
export function parseDockerHost(value: string, env: {DOCKER_TLS_VERIFY?: string} = {}): Endpoint {
  const raw = value.trim()
  if (raw === '') throw new UsageError('DOCKER_HOST is empty', {hint: 'unset DOCKER_HOST or set it to e.g. unix:///var/run/docker.sock'})
  if (raw.startsWith('unix://')) {
    const socketPath = raw.slice('unix://'.length)
    if (!socketPath) throw badHost(raw)
    return {kind: 'socket', socketPath, dockerHost: raw}
  }
  if (raw.startsWith('npipe://')) {
    const pipe = raw.slice('npipe://'.length).replaceAll('/', '\\')
    if (!pipe) throw badHost(raw)
    return {kind: 'pipe', socketPath: pipe, dockerHost: raw}
  }
  if (raw.startsWith('//') || raw.startsWith('\\\\')) {
    return {kind: 'pipe', socketPath: raw.replaceAll('/', '\\'), dockerHost: `npipe://${raw.replaceAll('\\', '/')}`}
  }
  if (raw.startsWith('/')) return {kind: 'socket', socketPath: raw, dockerHost: `unix://${raw}`}
  const match = /^(tcp|http|https|ssh):\/\/(.*)$/.exec(raw)
  if (!match) throw badHost(raw)
  const scheme = match[1] as 'tcp' | 'http' | 'https' | 'ssh'
  let url: URL
  try {
    url = new URL(`${scheme === 'tcp' ? 'http' : scheme}://${match[2]}`)
  } catch {
    throw badHost(raw)
  }
  if (!url.hostname) throw badHost(raw)
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  // URL drops a port equal to the scheme's default (http://h:80), so read it from the text.
  const explicitPort = /^(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/]*):(\d+)/.exec(match[2])?.[1]
  if (scheme === 'ssh') {
    return {kind: 'ssh', host, port: explicitPort ? Number(explicitPort) : 22, username: url.username || undefined, dockerHost: raw}
  }
  const tls = scheme === 'https' || (scheme === 'tcp' && isTruthy(env.DOCKER_TLS_VERIFY))
  const protocol = tls ? 'https' : 'http'
  const port = explicitPort ? Number(explicitPort) : tls ? 2376 : 2375
  return {kind: 'http', protocol, host, port, dockerHost: raw}
}

function isTruthy(value: string | undefined): boolean {
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false'
}

function badHost(raw: string): UsageError {
  return new UsageError(`DOCKER_HOST is not a valid engine address: ${JSON.stringify(raw)}`, {
    hint: 'use unix:///path/to.sock, tcp://host:port, http(s)://host:port, ssh://user@host or npipe:////./pipe/name',
  })
}

/** The sockets tried, in order, when DOCKER_HOST is unset. */
export function defaultSocketCandidates(env: NodeJS.ProcessEnv, uid: number | undefined): string[] {
  const runtimeDir = env.XDG_RUNTIME_DIR || (uid === undefined ? undefined : `/run/user/${uid}`)
  const list = ['/var/run/docker.sock']
  if (runtimeDir) list.push(join(runtimeDir, 'podman', 'podman.sock'))
  list.push('/run/podman/podman.sock')
  if (runtimeDir) list.push(join(runtimeDir, 'docker.sock'))
  list.push(join(homedir(), '.docker', 'run', 'docker.sock'))
  return list
}

export interface EndpointChoice {
  endpoint: Endpoint
  /** Where the choice came from, for `config` and error messages. */
  source: 'DOCKER_HOST' | 'docker context' | 'default socket' | 'fallback'
}

/** DOCKER_HOST, else the current docker context, else the first socket that exists. */
export function discoverEndpoint(
  env: NodeJS.ProcessEnv = process.env,
  contextHost: () => string | undefined = () => undefined,
  exists: (path: string) => boolean = existsSync,
): EndpointChoice {
  if (env.DOCKER_HOST !== undefined && env.DOCKER_HOST !== '') {
    return {endpoint: parseDockerHost(env.DOCKER_HOST, env), source: 'DOCKER_HOST'}
  }
  const fromContext = contextHost()
  if (fromContext) return {endpoint: parseDockerHost(fromContext, env), source: 'docker context'}
  const candidates = defaultSocketCandidates(env, process.getuid?.())
  const found = candidates.find((path) => exists(path))
  const socketPath = found ?? candidates[0]
  return {endpoint: {kind: 'socket', socketPath, dockerHost: `unix://${socketPath}`}, source: found ? 'default socket' : 'fallback'}
}
