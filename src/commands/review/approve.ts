import {Command, type Input} from '../../cli/command.js'
import {Args, Flags} from '../../cli/params.js'
import {jsonFlag, pathArg} from '../../cli/flags.js'
import {approveKeptPush, type ApproveResult} from '../../lib/git/review-approve.js'
import {resolveWorkspace} from '../../lib/workspace.js'

const short = (commit: string | null) => (commit ?? '').slice(0, 12)

function describe(r: ApproveResult): string {
  const moved =
    r.outcome === 'already-contained'
      ? `${r.branch} already contains ${short(r.kept)}; nothing moved`
      : r.outcome === 'created'
        ? `created ${r.branch} at ${short(r.commit)}`
        : r.outcome === 'merge'
          ? `merged ${short(r.kept)} into ${r.branch}: ${short(r.previous)} -> ${short(r.commit)}`
          : `fast-forwarded ${r.branch}: ${short(r.previous)} -> ${short(r.commit)}`
  const checkout = r.checkout === 'index' ? '; the checkout on the host already held it, its index followed' : r.checkout === 'work-tree' ? '; the checkout on the host was updated' : ''
  const kept = r.keptRemoved ? `; refs/sandbox/${r.branch} removed` : `; refs/sandbox/${r.branch} was pushed anew meanwhile and stays for review`
  return moved + checkout + kept
}

export default class ReviewApprove extends Command {
  static override summary = "Approve a push that waits for review: move the host's branch to refs/sandbox/<branch>, as you, with the host's hooks."
  static override description =
    "Fast-forward only: when the branch moved on the host since the push, approve refuses in one line (exit 7); --merge then makes a merge commit instead (git 2.38 or later). The branch moves by a push of the host repository into itself (git push . <commit>:refs/heads/<branch>), so the host's receive hooks run (pre-receive, update, reference-transaction, post-receive, post-update), as for a push the gate lets through; pre-push does not. A branch checked out on the host moves with its checkout: when the work tree already holds the push (a bind-mode sandbox's shared work tree), only the index follows; otherwise a clean work tree is updated and one with changes refuses (exit 7). Then the kept ref is deleted."
  static override examples = ['<%= config.bin %> review approve main', '<%= config.bin %> review approve main --merge', '<%= config.bin %> review approve feat/x ~/src/app']
  static override args = {
    branch: Args.required('the branch the push was for (refs/sandbox/<branch>)'),
    path: pathArg,
  }

  static override flags = {
    json: jsonFlag,
    merge: Flags.boolean({description: 'make a merge commit of the branch and the push (also when a fast-forward is possible)'}),
  }

  async run({args, flags}: Input<typeof ReviewApprove>): Promise<number | void> {
    const result = await approveKeptPush({reporter: this.reporter}, resolveWorkspace(args.path), args.branch, {merge: flags.merge})
    if (flags.json) return this.outJson(result)
    this.out(describe(result))
  }
}
