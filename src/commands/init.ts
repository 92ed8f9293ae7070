import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base.js'
import {baseTagFlag, pathArg} from '../cli/flags.js'
import {confirm, isInteractive} from '../cli/output.js'
import {loadSettings} from '../lib/config/load.js'
import {initWorkspace} from '../lib/init.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Init extends BaseCommand {
  static override summary = 'Create .agent-sandbox/ in a workspace and build its image.'
  static override examples = ['<%= config.bin %> init', '<%= config.bin %> init ~/src/app --base-tag 2026-11-22', '<%= config.bin %> init --force']
  static override args = {path: pathArg}
  static override flags = {
    'base-tag': baseTagFlag,
    force: Flags.boolean({description: "remove this workspace's containers and .agent-sandbox/ first (asks on a TTY)"}),
    yes: Flags.boolean({char: 'y', description: 'do not ask for confirmation'}),
  }

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Init)
    const ws = resolveWorkspace(args.path)
    const {settings} = loadSettings({workspacePath: undefined, flags: flags['base-tag'] ? {baseTag: flags['base-tag']} : undefined})
    if (flags.force && !flags.yes && isInteractive()) {
      const ok = await confirm(`Remove the sandbox containers and ${ws.path}/.agent-sandbox, then re-create them?`)
      if (!ok) this.exit(1)
    }
    const engine = await this.engine(flags)
    const result = await initWorkspace(engine, ws, {force: flags.force, baseTag: settings.baseTag, reporter: this.reporter})
    this.out(`initialised ${result.dir}; image ${result.image}`)
  }
}
