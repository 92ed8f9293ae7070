import {Command, type Input} from '../cli/command.js'
import {stdio} from '../cli/output.js'
import {allowHostNetworkFlag, branchFlag, networkFlag, pathArg} from '../cli/flags.js'
import type {NetworkMode} from '../lib/config/schema.js'
import {UsageError} from '../lib/errors.js'
import {execInSandbox} from '../lib/sandbox/session.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Exec extends Command {
  static override summary = 'Run a command in the sandbox (non-interactive) and exit with its code.'
  static override description = 'stdout and stderr stream separately, stdin is passed through. The sandbox is started first if needed.'
  static override examples = ['<%= config.bin %> exec -- npm test', "<%= config.bin %> exec ~/src/app -- sh -c 'echo $HOME'"]
  static override takesCommand = true
  static override interruptible = true
  static override args = {path: pathArg}
  static override flags = {'allow-host-network': allowHostNetworkFlag, branch: branchFlag, network: networkFlag}

  async run({args, flags, command}: Input<typeof Exec>): Promise<number> {
    if (command === undefined) throw new UsageError('no command given', {hint: 'put the command after --, e.g. agent-sandbox exec -- npm test'})
    if (command.length === 0) throw new UsageError('no command given after --', {hint: 'e.g. agent-sandbox exec -- npm test'})
    const ws = resolveWorkspace(args.path)
    const io = {stdin: process.stdin, stdout: stdio('stdout'), stderr: stdio('stderr')}
    // A reader that goes away (`exec -- yes | head -1`) ends the session as SIGPIPE ends the docker CLI.
    const onPipeError = (error: NodeJS.ErrnoException) => this.interrupts?.abort(error.code === 'EPIPE' ? 'SIGPIPE' : 'SIGHUP')
    io.stdout.on('error', onPipeError)
    io.stderr.on('error', onPipeError)
    try {
      return await execInSandbox(await this.context(flags), ws, command, {
        branch: flags.branch,
        network: flags.network as NetworkMode | undefined,
        allowHostNetwork: flags['allow-host-network'],
        attach: {io},
      })
    } finally {
      io.stdout.removeListener('error', onPipeError)
      io.stderr.removeListener('error', onPipeError)
    }
  }
}
