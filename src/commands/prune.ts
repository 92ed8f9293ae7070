import {Command, type Input} from '../cli/command.js'
import {jsonFlag} from '../cli/flags.js'
import {Args, Flags} from '../cli/params.js'
import {parseAge, prune, prunePlan, type PrunePlan} from '../lib/sandbox/prune.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Prune extends Command {
  static override summary = 'Remove stopped sandboxes (with their gate and gateway), and with --volumes their volumes.'
  static override description =
    'A running sandbox is never removed. Stopped sandboxes go, those of workspaces that no longer exist included; --older-than keeps those used more recently. Volumes go only with --volumes, and only those of workspaces left without any sandbox. --dry-run prints exactly what would be removed. With a path, only the sandboxes and volumes of workspaces at or under it (a workspace, or a tree of them, gone ones included).'
  static override examples = [
    '<%= config.bin %> prune --dry-run',
    '<%= config.bin %> prune --older-than 7d',
    '<%= config.bin %> prune --volumes ~/src/old-app',
    '<%= config.bin %> prune ~/src --older-than 2w',
    '<%= config.bin %> prune --json',
  ]
  static override interruptible = true
  static override args = {path: Args.optional('only workspaces at or under this directory (default: all)')}
  static override flags = {
    'dry-run': Flags.boolean({description: 'print what would be removed, remove nothing'}),
    json: jsonFlag,
    'older-than': Flags.string({description: 'only sandboxes last used at least this long ago, e.g. 7d, 12h, 2w'}),
    volumes: Flags.boolean({description: 'also remove the volumes (agent git directory, history, shelf) of workspaces left without a sandbox'}),
  }

  async run({args, flags}: Input<typeof Prune>): Promise<number | void> {
    const olderThanMs = flags['older-than'] === undefined ? undefined : parseAge(flags['older-than'])
    const under = args.path === undefined ? undefined : resolveWorkspace(args.path).path
    const ctx = await this.context(flags)
    const plan = await prunePlan(ctx, {olderThanMs, volumes: flags.volumes, under})
    const done: PrunePlan & {skipped?: string[]} = flags['dry-run'] ? plan : await prune(ctx, plan)
    if (flags.json) return this.outJson(done)
    for (const s of done.sandboxes) this.out(`sandbox ${s.name} (${s.reason}, last used ${s.lastUsed}${s.sidecars.length ? `; with ${s.sidecars.join(', ')}` : ''})`)
    for (const o of done.orphans) this.out(`sidecar ${o} (its sandbox is gone)`)
    for (const v of done.volumes) this.out(`volume ${v}`)
    for (const k of done.skipped ?? []) this.reporter.warn(`${k} was started meanwhile: kept`)
    if (!done.sandboxes.length && !done.orphans.length && !done.volumes.length) this.reporter.info('nothing to prune')
    else if (flags['dry-run']) this.reporter.info('dry run: nothing was removed')
  }
}
