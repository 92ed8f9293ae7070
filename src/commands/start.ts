import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {allowHostNetworkFlag, baseTagFlag, branchFlag, limitFlags, nestedFlag, networkFlag, pathArg, registryFlag, shapeFlags} from '../cli/flags.js'
import {startSandbox} from '../lib/sandbox/lifecycle.js'
import {Labels, resolveWorkspace} from '../lib/workspace.js'
import type {NetworkMode} from '../lib/config/schema.js'

export default class Start extends Command {
  static override summary = "Start the workspace's sandbox and wait until it is ready (firewall in place)."
  static override examples = ['<%= config.bin %> start', '<%= config.bin %> start ~/src/app --build', '<%= config.bin %> start --allow-domain api.example.com', '<%= config.bin %> start --nested']
  static override interruptible = true
  static override args = {path: pathArg}
  static override flags = {
    'allow-domain': Flags.string({description: 'also allow this domain (repeatable; *.example.com for subdomains)', multiple: true}),
    'allow-host-network': allowHostNetworkFlag,
    'base-tag': baseTagFlag,
    branch: branchFlag,
    build: Flags.boolean({description: 'build the image if it is missing'}),
    ...limitFlags,
    json: Flags.boolean({description: 'print the result as JSON'}),
    nested: nestedFlag,
    network: networkFlag,
    registry: registryFlag,
  }

  async run({args, flags}: Input<typeof Start>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const result = await startSandbox(await this.context(flags), ws, {
      branch: flags.branch,
      baseTag: flags['base-tag'],
      build: flags.build,
      network: flags.network as NetworkMode | undefined,
      allowDomains: flags['allow-domain'],
      allowHostNetwork: flags['allow-host-network'],
      flags: shapeFlags(flags),
    })
    if (result.container.labels[Labels.network] === 'open') {
      this.reporter.warn('network mode "open": egress from this sandbox is NOT filtered')
    }
    if (flags.json) this.outJson({name: result.name, action: result.action, id: result.container.id, workdir: result.container.workdir})
    else this.out(`${result.name} ${result.action === 'running' ? 'already running' : result.action}`)
  }
}
