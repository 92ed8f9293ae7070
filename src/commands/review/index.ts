import {Command, type Input} from '../../cli/command.js'
import {Flags} from '../../cli/params.js'
import {jsonFlag, pathArg} from '../../cli/flags.js'
import {formatPushReview} from '../../cli/review-output.js'
import {listReview} from '../../lib/git/review.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class Review extends Command {
  static override summary = 'List what the sandboxes of a workspace pushed that waits for you: each refs/sandbox/<branch> the push gate kept.'
  static override description =
    'The push gate keeps a push it does not let through (to a protected branch, or a branch behind the host) as refs/sandbox/<branch> in the host repository. For each, review shows its commits, its diffstat, the sandbox that pushed it (while its gate\'s log has it) and flags for what deserves a look first: CI workflows, lockfiles, hook-framework configuration, .agent-sandbox/, files over 1 MiB, binary files and new executables. Then: review show, review approve or review reject. With --all, also the pushes each sandbox\'s gate let straight through since the sandbox last started. Git runs as you (as the workspace\'s owner when you are root).'
  static override examples = ['<%= config.bin %> review', '<%= config.bin %> review ~/src/app --json', '<%= config.bin %> review --all']
  static override args = {path: pathArg}
  static override flags = {
    all: Flags.boolean({description: "also list the pushes that went straight through, from each sandbox's gate log"}),
    json: jsonFlag,
  }

  async run({args, flags}: Input<typeof Review>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const listing = await listReview({engine: await this.engine(flags), reporter: this.reporter}, ws, {all: flags.all})
    if (flags.json) return this.outJson(listing)
    this.out(formatPushReview(listing, args.path ?? ''))
  }
}
