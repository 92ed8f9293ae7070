/**
 * The sandbox's seccomp profile. Every sandbox runs one of ours: the engine's
 * default allowlist with socket() limited to the families netfilter sees
 * (templates/seccomp-default.json), or with nested containers the same plus
 * what a nested runtime needs (templates/seccomp-nested.json).
 */
import {defaultSeccompProfile} from '../util/assets.js'
import {isLoopbackHost} from '../util/addresses.js'

/** The security options of a sandbox: no new privileges, our profile, and for nested containers an unmasked /proc (`unmasked`). */
export function sandboxSecurityOpt(nestedSeccomp: string | undefined, unmasked: string): string[] {
  return nestedSeccomp ? ['no-new-privileges', `seccomp=${nestedSeccomp}`, unmasked] : ['no-new-privileges', `seccomp=${defaultSeccompProfile}`]
}

/**
 * The firewall's inbound ports: a port published on loopback answers only the
 * engine's port publisher (AGENT_SANDBOX_INBOUND_PORTS); one published on
 * another host address, the user's explicit choice, any peer
 * (AGENT_SANDBOX_INBOUND_PEER_PORTS).
 */
export function inboundPortsEnv(ports: Array<{hostIp: string; containerPort: string}>): Array<{name: string; value: string; secret: false}> {
  const peer = [...new Set(ports.filter((p) => !isLoopbackHost(p.hostIp)).map((p) => p.containerPort))]
  const own = [...new Set(ports.filter((p) => isLoopbackHost(p.hostIp)).map((p) => p.containerPort))].filter((p) => !peer.includes(p))
  return [
    ...(own.length ? [{name: 'AGENT_SANDBOX_INBOUND_PORTS', value: own.join(','), secret: false as const}] : []),
    ...(peer.length ? [{name: 'AGENT_SANDBOX_INBOUND_PEER_PORTS', value: peer.join(','), secret: false as const}] : []),
  ]
}
