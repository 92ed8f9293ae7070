import {Command, type Input} from '../cli/command.js'
import {branchFlag, pathArg} from '../cli/flags.js'
import {stopSandbox} from '../lib/sandbox/stop.js'
import {Names, resolveWorkspace} from '../lib/workspace.js'

export default class Stop extends Command {
  static override summary = "Stop the workspace's sandbox. Volumes and the workspace are untouched."
  static override examples = ['<%= config.bin %> stop', '<%= config.bin %> stop ~/src/app --branch feat']
  static override args = {path: pathArg}
  static override flags = {branch: branchFlag}

  async run({args, flags}: Input<typeof Stop>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const engine = await this.engine(flags)
    const state = await stopSandbox({engine}, ws, flags.branch)
    const name = Names.container(ws, flags.branch)
    this.out(state === 'stopped' ? `${name} stopped` : state === 'not-running' ? `${name} was not running` : `no sandbox ${name}`)
  }
}
