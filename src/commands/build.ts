import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base.js'
import {baseTagFlag, pathArg} from '../cli/flags.js'
import {loadSettings} from '../lib/config/load.js'
import {buildRepoImage} from '../lib/images.js'
import {requireInitialised} from '../lib/sandbox.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Build extends BaseCommand {
  static override summary = "Build the workspace's image from .agent-sandbox/Dockerfile."
  static override examples = ['<%= config.bin %> build', '<%= config.bin %> build ~/src/app --base-tag 2026-11-22']
  static override args = {path: pathArg}
  static override flags = {'base-tag': baseTagFlag, json: Flags.boolean({description: 'print the result as JSON'})}

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Build)
    const ws = resolveWorkspace(args.path)
    requireInitialised(ws)
    const {settings} = loadSettings({workspacePath: ws.path, flags: flags['base-tag'] ? {baseTag: flags['base-tag']} : undefined})
    const engine = await this.engine(flags)
    const image = await buildRepoImage(engine, ws, {baseTag: settings.baseTag, reporter: this.reporter})
    if (flags.json) this.outJson({image, baseTag: settings.baseTag})
    else this.out(image)
  }
}
