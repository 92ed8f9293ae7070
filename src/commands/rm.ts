import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {branchFlag, pathArg} from '../cli/flags.js'
import {confirm, isInteractive} from '../cli/output.js'
import {UsageError} from '../lib/errors.js'
import {removeSandbox} from '../lib/sandbox/lifecycle.js'
import {removeWorktree} from '../lib/sandbox/repo-shelf.js'
import {Names, resolveWorkspace} from '../lib/workspace.js'

export default class Rm extends Command {
  static override summary = "Remove the workspace's sandbox container (volumes only with --volumes)."
  static override examples = ['<%= config.bin %> rm', '<%= config.bin %> rm --volumes --yes', '<%= config.bin %> rm --branch feat --worktree']
  static override args = {path: pathArg}
  static override flags = {
    branch: branchFlag,
    force: Flags.boolean({description: 'with --worktree: remove it even if it holds uncommitted or unpushed work'}),
    json: Flags.boolean({description: 'print the result as JSON'}),
    volumes: Flags.boolean({description: "also remove the workspace's own volumes (history, repo-shelf); asks on a TTY"}),
    worktree: Flags.boolean({description: "with --branch: also remove the branch's worktree (refused if work would be lost, unless --force)"}),
    yes: Flags.boolean({char: 'y', description: 'do not ask for confirmation'}),
  }

  async run({args, flags}: Input<typeof Rm>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    if (flags.worktree && flags.branch === undefined) throw new UsageError('--worktree needs --branch', {hint: 'e.g. agent-sandbox rm --branch feat --worktree'})
    if (flags.volumes && !flags.yes) {
      if (!isInteractive()) throw new UsageError('--volumes deletes shell history and the repo-shelf of this workspace', {hint: 'add --yes to confirm'})
      if (!(await confirm(`Delete the history and repo-shelf volumes of ${ws.path}?`))) return 1
    }
    const ctx = await this.context(flags)
    // Check the worktree first: if work would be lost, nothing is removed at all.
    const worktree = flags.worktree && flags.branch !== undefined ? await removeWorktree(ctx, ws, flags.branch, {force: flags.force}) : undefined
    const result = await removeSandbox(ctx, ws, {branch: flags.branch, volumes: flags.volumes})
    if (flags.json) return this.outJson({name: Names.container(ws, flags.branch), ...result, worktree: worktree?.worktree})
    if (worktree) this.out(`worktree of ${flags.branch} ${worktree.worktree}`)
    this.out(result.container === 'removed' ? `${Names.container(ws, flags.branch)} removed` : `no sandbox ${Names.container(ws, flags.branch)}`)
    for (const v of result.volumes) this.out(`volume ${v} removed`)
  }
}
