import {Args, Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {baseTagFlag} from '../cli/flags.js'
import {describeCheckout, provisionBranch} from '../lib/sandbox/repo-shelf.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Checkout extends Command {
  static override summary = "Provision the repo-shelf and a worktree for a branch, without starting anything."
  static override description =
    'The worktree comes from the local branch if the shelf has one, else origin/<branch>, else host/<branch>, else a new branch from the default branch. Without a reachable origin it falls back to the host repository, with a warning.'
  static override examples = ['<%= config.bin %> checkout feat/login', '<%= config.bin %> checkout fix-42 ~/src/app --base-tag 2026-11-22']
  static override args = {
    branch: Args.required('the branch'),
    path: Args.optional('workspace directory (default: the current directory)'),
  }
  static override flags = {'base-tag': baseTagFlag, json: Flags.boolean({description: 'print the result as JSON'})}

  async run({args, flags}: Input<typeof Checkout>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const ctx = await this.context(flags)
    const result = await provisionBranch(ctx, ws, args.branch, {baseTag: flags['base-tag']})
    if (flags.json) return this.outJson(result)
    this.out(describeCheckout(result))
  }
}
