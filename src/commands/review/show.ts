import {Command, type Input} from '../../cli/command.js'
import {Args} from '../../cli/params.js'
import {pathArg} from '../../cli/flags.js'
import {showKeptPush} from '../../lib/git/review.js'
import {resolveWorkspace} from '../../lib/workspace.js'

export default class ReviewShow extends Command {
  static override summary = 'Show the diff of a push that waits for review (refs/sandbox/<branch>), through your pager.'
  static override description =
    "The diff from where the push starts (its merge base with the host's branch) to the kept commit, with a diffstat first, by the host's own git: paged as git pages (GIT_PAGER, core.pager, PAGER) when stdout is a terminal, plain otherwise."
  static override examples = ['<%= config.bin %> review show main', '<%= config.bin %> review show feat/x ~/src/app | less -R']
  static override interruptible = true
  static override args = {
    branch: Args.required('the branch the push was for (refs/sandbox/<branch>)'),
    path: pathArg,
  }

  async run({args}: Input<typeof ReviewShow>): Promise<number | void> {
    const {interrupts} = this
    return showKeptPush({signal: interrupts?.signal, foreground: interrupts && (() => interrupts.foreground())}, resolveWorkspace(args.path), args.branch)
  }
}
