import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {allowHostNetworkFlag, baseTagFlag, branchFlag, networkFlag, pathArg} from '../cli/flags.js'
import type {NetworkMode} from '../lib/config/schema.js'
import {execInSandbox} from '../lib/sandbox/session.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Shell extends Command {
  static override summary = 'Open an interactive login shell as node in the sandbox (the default command).'
  static override examples = ['<%= config.bin %>', '<%= config.bin %> shell ~/src/app', '<%= config.bin %> shell --branch feat']
  static override interruptible = true
  static override args = {path: pathArg}
  static override flags = {
    'allow-host-network': allowHostNetworkFlag,
    'base-tag': baseTagFlag,
    branch: branchFlag,
    build: Flags.boolean({description: 'build the image if it is missing'}),
    network: networkFlag,
  }

  async run({args, flags}: Input<typeof Shell>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const code = await execInSandbox(await this.context(flags), ws, ['bash', '-l'], {
      branch: flags.branch,
      baseTag: flags['base-tag'],
      build: flags.build,
      network: flags.network as NetworkMode | undefined,
      allowHostNetwork: flags['allow-host-network'],
      attach: {tty: Boolean(process.stdin.isTTY && process.stdout.isTTY), term: process.env.TERM},
    })
    return code
  }
}
