import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base.js'
import {branchFlag, pathArg} from '../cli/flags.js'
import {confirm, isInteractive} from '../cli/output.js'
import {UsageError} from '../lib/errors.js'
import {removeSandbox} from '../lib/sandbox.js'
import {Names, resolveWorkspace} from '../lib/workspace.js'

export default class Rm extends BaseCommand {
  static override summary = "Remove the workspace's sandbox container (volumes only with --volumes)."
  static override examples = ['<%= config.bin %> rm', '<%= config.bin %> rm --volumes --yes', '<%= config.bin %> rm --branch feat']
  static override args = {path: pathArg}
  static override flags = {
    branch: branchFlag,
    json: Flags.boolean({description: 'print the result as JSON'}),
    volumes: Flags.boolean({description: "also remove the workspace's own volumes (history, repo-shelf); asks on a TTY"}),
    yes: Flags.boolean({char: 'y', description: 'do not ask for confirmation'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Rm)
    const ws = resolveWorkspace(args.path)
    if (flags.volumes && !flags.yes) {
      if (!isInteractive()) throw new UsageError('--volumes deletes shell history and the repo-shelf of this workspace', {hint: 'add --yes to confirm'})
      if (!(await confirm(`Delete the history and repo-shelf volumes of ${ws.path}?`))) this.exit(1)
    }
    const engine = await this.engine(flags)
    const result = await removeSandbox({engine}, ws, {branch: flags.branch, volumes: flags.volumes})
    if (flags.json) return this.outJson({name: Names.container(ws, flags.branch), ...result})
    this.out(result.container === 'removed' ? `${Names.container(ws, flags.branch)} removed` : `no sandbox ${Names.container(ws, flags.branch)}`)
    for (const v of result.volumes) this.out(`volume ${v} removed`)
  }
}
