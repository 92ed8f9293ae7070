/** Arguments and flags shared by several commands. */
import {Args, Flags} from '@oclif/core'

export const pathArg = Args.string({name: 'path', description: 'workspace directory (default: the current directory)', required: false})

export const baseTagFlag = Flags.string({description: 'tag of agent-sandbox-base to build on (default: config baseTag, else latest)'})

export const branchFlag = Flags.string({description: 'work on a git worktree of this branch in the repo-shelf (branch mode)'})

export const networkFlag = Flags.string({
  description: 'network mode: firewall (default-deny allowlist), none (no network), open (unfiltered, loudly warned)',
  options: ['firewall', 'none', 'open'],
})

export const allowHostNetworkFlag = Flags.boolean({
  description: 'allow dockerNetwork "host" from the settings (only with --network open: the sandbox then shares the host\'s network, unfiltered)',
})

/** Resource limits, for `start` and `run` (defaults from config `limits`). */
export const limitFlags = {
  cpus: Flags.string({description: 'CPU limit, e.g. 1.5 (config limits.cpus)'}),
  memory: Flags.string({description: 'memory limit, e.g. 512m or 4g; swap is limited to the same (config limits.memory)'}),
  'pids-limit': Flags.integer({description: 'process limit, e.g. 256 (config limits.pids)', min: 16}),
}
