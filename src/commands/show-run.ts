import {Command, type Input} from '../cli/command.js'
import {allowHostNetworkFlag, branchFlag, nestedFlag, networkFlag, pathArg, registryFlag, shapeFlags} from '../cli/flags.js'
import type {NetworkMode} from '../lib/config/schema.js'
import {EngineError} from '../lib/errors.js'
import type {EngineKind} from '../lib/engine/types.js'
import {engineTraits, prepareSandbox} from '../lib/sandbox/prepare.js'
import {posix} from 'node:path'
import {secretValues} from '../lib/sandbox/spec.js'
import {toShellCommand} from '../lib/sandbox/spec-render.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class ShowRun extends Command {
  static override summary = 'Print the `docker run` (or, on Podman, `podman run`) command that `start` would use, without running it.'
  static override description =
    'Secret environment values are printed as references (`--env NAME`): export them before pasting. A sandbox with a repository is followed by its push gate, and one with the firewall by its egress gateway: containers in its network namespace.'
  static override examples = ['<%= config.bin %> show-run', '<%= config.bin %> show-run ~/src/app --branch feat', '<%= config.bin %> show-run --nested']
  static override args = {path: pathArg}
  static override flags = {'allow-host-network': allowHostNetworkFlag, branch: branchFlag, nested: nestedFlag, network: networkFlag, registry: registryFlag}

  async run({args, flags}: Input<typeof ShowRun>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const {kind, ...traits} = await this.traits(flags)
    const {spec, gate, gateway, placeholders} = await prepareSandbox(ws, {
      branch: flags.branch,
      network: flags.network as NetworkMode | undefined,
      allowHostNetwork: flags['allow-host-network'],
      flags: shapeFlags(flags),
      ...traits,
    })
    this.secrets.push(...secretValues(spec))
    this.out(toShellCommand(spec, placeholders.map((p) => ({path: posix.join(ws.path, p.relative), kind: p.kind})), [gate, gateway].filter((c) => c !== undefined), kind))
  }

  /** What the engine needs (user namespace, SELinux) and its CLI, when it answers; show-run itself needs no engine. */
  private async traits(flags: {engine?: string}): Promise<{userns?: string; selinux?: boolean; kind?: EngineKind}> {
    try {
      const engine = await this.engine(flags)
      const [traits, kind] = await Promise.all([engineTraits({engine}), engine.kind()])
      return {...traits, kind}
    } catch (error) {
      if (error instanceof EngineError) return {}
      throw error
    }
  }
}
