import {Flags} from '../cli/params.js'
import {existsSync} from 'node:fs'
import {Command, type Input} from '../cli/command.js'
import {pathArg} from '../cli/flags.js'
import {confirm, isInteractive} from '../cli/output.js'
import {agentSandboxDir, listTrusted, recordTrust, revokeTrust} from '../lib/config/trust.js'
import {formatReview, reviewWorkspace} from '../lib/config/trust-review.js'
import {NotInitialisedError, UsageError} from '../lib/errors.js'
import {resolveWorkspace} from '../lib/workspace.js'
import {quoteArg} from '../lib/util/shell-quote.js'

export default class Trust extends Command {
  static override summary = "Review a workspace's own .agent-sandbox/ and trust it, so the settings in it that widen the sandbox apply."
  static override description =
    "A repository's .agent-sandbox/ is its input, not yours: settings that widen the sandbox (network open, dockerNetwork, secretEnv, allowDomains, ports beyond loopback, …) and a Dockerfile other than init's template apply only once you trust their exact bytes. When they change (a pull, a merge), commands that would apply them refuse until you trust them again. See docs/security.md."
  static override examples = [
    '<%= config.bin %> trust',
    '<%= config.bin %> trust ~/src/app --yes',
    '<%= config.bin %> trust --revoke ~/src/app',
    '<%= config.bin %> trust --list --json',
  ]
  static override args = {path: pathArg}
  static override flags = {
    json: Flags.boolean({description: 'print the result as JSON'}),
    list: Flags.boolean({description: 'list the trusted workspaces (and your trustedPaths)'}),
    revoke: Flags.boolean({description: "forget the workspace's approval"}),
    yes: Flags.boolean({char: 'y', description: 'trust without asking'}),
  }

  async run({args, flags}: Input<typeof Trust>): Promise<number | void> {
    if (flags.list && (flags.revoke || args.path !== undefined)) throw new UsageError('--list takes no path and no --revoke', {hint: 'agent-sandbox trust --list'})
    if (flags.list) {
      const listed = listTrusted()
      if (flags.json) return this.outJson(listed)
      for (const w of listed.workspaces) this.out(`${w.status.padEnd(8)} ${w.path}  (${w.by === 'init' ? 'written by init' : 'trusted'} ${w.approvedAt})`)
      for (const glob of listed.trustedPaths) this.out(`glob     ${glob}  (trustedPaths in your config)`)
      return
    }
    const ws = resolveWorkspace(args.path)
    if (flags.revoke) {
      const revoked = revokeTrust(ws.path)
      if (flags.json) return this.outJson({path: ws.path, revoked})
      return this.out(revoked ? `no longer trusted: ${ws.path}` : `${ws.path} was not trusted`)
    }
    if (!existsSync(agentSandboxDir(ws.path))) {
      throw new NotInitialisedError(`${ws.path} has no .agent-sandbox/ to trust`, {hint: `run: agent-sandbox init ${quoteArg(ws.path)}`})
    }
    const review = reviewWorkspace(ws.path)
    if (!flags.json) for (const line of formatReview(review)) this.out(line)
    if (!flags.yes) {
      if (!isInteractive()) throw new UsageError(`not trusting ${ws.path}: no terminal to ask on`, {hint: 'pass --yes to trust what is shown above'})
      if (!(await confirm(`Trust these files of ${ws.path}?`))) return 1
    }
    const store = recordTrust(ws.path, review.snapshot, 'trust')
    if (flags.json) return this.outJson({path: ws.path, trusted: true, store, files: review.snapshot.files, changes: review.changes, dockerfile: review.assessment.build})
    this.out(`trusted ${ws.path} (${store})`)
  }
}
