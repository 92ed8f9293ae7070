/** Arguments and flags shared by several commands. */
import {Args, Flags} from './params.js'
import type {ConfigFile, RegistryPreset} from '../lib/config/schema.js'

export const pathArg = Args.optional('workspace directory (default: the current directory)')

export const baseTagFlag = Flags.string({description: 'tag of agent-sandbox-base to build on (default: config baseTag, else latest)'})

export const branchFlag = Flags.string({description: 'work on a git worktree of this branch in the repo-shelf (branch mode)'})

export const jsonFlag = Flags.boolean({description: 'print the result as JSON'})

export const networkFlag = Flags.string({
  description: 'network mode: firewall (default-deny allowlist), none (no network), open (unfiltered, loudly warned)',
  options: ['firewall', 'none', 'open'],
})

export const allowHostNetworkFlag = Flags.boolean({
  description: 'allow dockerNetwork "host" from the settings (only with --network open: the sandbox then shares the host\'s network, unfiltered)',
})

export const nestedFlag = Flags.boolean({
  description: 'nested containers: rootless Podman inside the sandbox (docker, DOCKER_HOST, compose), behind its firewall (config nestedContainers)',
})

export const registryFlag = Flags.string({
  description: 'allow pulls from this registry: docker.io, ghcr.io or quay.io (repeatable; config registries)',
  options: ['docker.io', 'ghcr.io', 'quay.io'],
  multiple: true,
})

/** The flags that shape the container as a config layer (the highest), or undefined when none was given. Pure. */
export function shapeFlags(flags: {cpus?: string; memory?: string; 'pids-limit'?: number; nested?: boolean; registry?: string[]}): ConfigFile | undefined {
  const limits = limitsFrom(flags)
  // The parser accepts only the flag's options, which are the presets.
  const registries = flags.registry?.length ? (flags.registry as RegistryPreset[]) : undefined
  const layer: ConfigFile = {...(limits ? {limits} : {}), ...(flags.nested ? {nestedContainers: true} : {}), ...(registries ? {registries} : {})}
  return Object.keys(layer).length ? layer : undefined
}

/** Resource limits, for `start` and `run` (defaults from config `limits`). */
export const limitFlags = {
  cpus: Flags.string({description: 'CPU limit, e.g. 1.5 (config limits.cpus)'}),
  memory: Flags.string({description: 'memory limit, e.g. 512m or 4g; swap is limited to the same (config limits.memory)'}),
  'pids-limit': Flags.integer({description: 'process limit, e.g. 256 (config limits.pids)', min: 16}),
}

/** The resource-limit flags as config values, or undefined when none was given. Pure. */
export function limitsFrom(flags: {cpus?: string; memory?: string; 'pids-limit'?: number}): {memory?: string; cpus?: number; pids?: number} | undefined {
  const limits: {memory?: string; cpus?: number; pids?: number} = {}
  if (flags.memory !== undefined) limits.memory = flags.memory
  if (flags.cpus !== undefined) limits.cpus = Number(flags.cpus)
  if (flags['pids-limit'] !== undefined) limits.pids = flags['pids-limit']
  return Object.keys(limits).length ? limits : undefined
}
