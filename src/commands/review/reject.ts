import {Command, type Input} from '../../cli/command.js'
import {Args} from '../../cli/params.js'
import {jsonFlag, pathArg} from '../../cli/flags.js'
import {rejectKeptPush} from '../../lib/git/review.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class ReviewReject extends Command {
  static override summary = 'Reject a push that waits for review: delete refs/sandbox/<branch> from the host repository.'
  static override description = "The host's branch does not move. The sandbox keeps its own commits, so the agent can push again."
  static override examples = ['<%= config.bin %> review reject main', '<%= config.bin %> review reject feat/x ~/src/app']
  static override args = {
    branch: Args.required('the branch the push was for (refs/sandbox/<branch>)'),
    path: pathArg,
  }

  static override flags = {json: jsonFlag}

  async run({args, flags}: Input<typeof ReviewReject>): Promise<number | void> {
    const result = await rejectKeptPush(resolveWorkspace(args.path), args.branch)
    if (flags.json) return this.outJson(result)
    this.out(`rejected ${result.ref} (${result.commit.slice(0, 12)}); ${result.branch} did not move`)
  }
}
