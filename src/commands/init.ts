import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {baseTagFlag, pathArg} from '../cli/flags.js'
import {confirm, isInteractive} from '../cli/output.js'
import {loadSettings} from '../lib/config/load.js'
import {UsageError} from '../lib/errors.js'
import {initFromClone, initWorkspace} from '../lib/sandbox/init.js'
import {parseRepoSlug} from '../lib/github/app.js'
import {resolve} from 'node:path'
import {resolveWorkspace} from '../lib/workspace.js'
import {quoteArg} from '../lib/util/shell-quote.js'

export default class Init extends Command {
  static override summary = 'Create .agent-sandbox/ in a workspace and build its image.'
  static override examples = [
    '<%= config.bin %> init',
    '<%= config.bin %> init ~/src/app --base-tag 2026-11-22',
    '<%= config.bin %> init --force',
    '<%= config.bin %> init --clone octocat/hello-world ~/src/hello',
  ]
  static override args = {path: pathArg}
  static override flags = {
    'base-tag': baseTagFlag,
    clone: Flags.string({description: 'clone this GitHub repository (owner/repo) into PATH (default ./<repo>) with the GitHub App token first'}),
    force: Flags.boolean({description: "remove this workspace's containers and .agent-sandbox/ first (asks on a TTY)"}),
    yes: Flags.boolean({char: 'y', description: 'do not ask for confirmation'}),
  }

  async run({args, flags}: Input<typeof Init>): Promise<number | void> {
    if (flags.clone !== undefined) {
      if (flags.force) throw new UsageError('--force cannot be used with --clone (a clone goes into a new or empty directory)', {hint: 'drop --force, or pass another path'})
      return this.initClone(flags.clone, args.path, flags)
    }
    const ws = resolveWorkspace(args.path)
    const {settings} = loadSettings({workspacePath: undefined, flags: flags['base-tag'] ? {baseTag: flags['base-tag']} : undefined})
    if (flags.force && !flags.yes && isInteractive()) {
      const ok = await confirm(`Remove the sandbox containers and ${ws.path}/.agent-sandbox, then re-create them?`)
      if (!ok) return 1
    }
    const ctx = await this.context(flags)
    const result = await initWorkspace(ctx, ws, {force: flags.force, baseTag: settings.baseTag})
    this.out(`initialised ${result.dir}; image ${result.image}`)
  }

  private async initClone(repo: string, path: string | undefined, flags: {'base-tag'?: string; engine?: string}): Promise<void> {
    const target = resolve(path ?? parseRepoSlug(repo).repo)
    const {settings} = loadSettings({workspacePath: undefined, flags: flags['base-tag'] ? {baseTag: flags['base-tag']} : undefined})
    const ctx = await this.context(flags)
    const result = await initFromClone(ctx, repo, target, {baseTag: settings.baseTag, github: settings.github})
    if (!result.shipped) return this.out(`cloned ${repo} into ${result.path}; initialised ${result.dir}; image ${result.image}`)
    const where = quoteArg(result.path)
    for (const change of result.refused) this.reporter.warn(`the repository's config.json sets ${change.key} (${change.summary}): refused until you trust it`)
    if (!result.image) this.reporter.warn(`the repository's .agent-sandbox/Dockerfile is not the template: not built until you trust it`)
    if (!result.image || result.refused.length) this.reporter.warn(`review and approve it with: agent-sandbox trust ${where}${result.image ? '' : `, then: agent-sandbox build ${where}`}`)
    this.out(`cloned ${repo} into ${result.path}; its own ${result.dir} is kept, untrusted${result.image ? `; image ${result.image}` : '; no image built'}`)
  }
}
