import {BaseCommand} from '../cli/base.js'
import {allowHostNetworkFlag, branchFlag, networkFlag, pathArg} from '../cli/flags.js'
import type {NetworkMode} from '../lib/config/schema.js'
import {UsageError} from '../lib/errors.js'
import {execInSandbox} from '../lib/sandbox/session.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Exec extends BaseCommand {
  static override summary = 'Run a command in the sandbox (non-interactive) and exit with its code.'
  static override description = 'stdout and stderr stream separately, stdin is passed through. The sandbox is started first if needed.'
  static override examples = ['<%= config.bin %> exec -- npm test', "<%= config.bin %> exec ~/src/app -- sh -c 'echo $HOME'"]
  static override strict = false
  static override args = {path: pathArg}
  static override flags = {'allow-host-network': allowHostNetworkFlag, branch: branchFlag, network: networkFlag}

  async run(): Promise<void> {
    const split = this.argv.indexOf('--')
    if (split === -1) throw new UsageError('no command given', {hint: 'put the command after --, e.g. agent-sandbox exec -- npm test'})
    const command = this.argv.slice(split + 1)
    if (command.length === 0) throw new UsageError('no command given after --', {hint: 'e.g. agent-sandbox exec -- npm test'})
    const {args, flags} = await this.parse({...Exec, strict: true} as typeof Exec, this.argv.slice(0, split))
    const ws = resolveWorkspace(args.path)
    const engine = await this.engine(flags)
    const code = await execInSandbox({engine, reporter: this.reporter}, ws, command, {
      branch: flags.branch,
      network: flags.network as NetworkMode | undefined,
      allowHostNetwork: flags['allow-host-network'],
      interactive: false,
    })
    this.exit(code)
  }
}
