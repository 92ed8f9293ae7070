import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {baseTagFlag, pathArg} from '../cli/flags.js'
import {buildRepoImage, workspaceBaseTag} from '../lib/images/build.js'
import {chooseCaCerts} from '../lib/images/ca.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Build extends Command {
  static override summary = "Build the workspace's image from .agent-sandbox/Dockerfile."
  static override description =
    'Nothing is built when nothing the image is built from has changed (the Dockerfile and the rest of .agent-sandbox/, the base image, the build arguments); --no-cache builds every step again.'
  static override examples = ['<%= config.bin %> build', '<%= config.bin %> build ~/src/app --base-tag 2026-11-22', '<%= config.bin %> build --no-cache']
  static override args = {path: pathArg}
  static override flags = {
    'base-tag': baseTagFlag,
    json: Flags.boolean({description: 'print the result as JSON'}),
    'no-cache': Flags.boolean({description: 'build every step again, even when nothing has changed'}),
  }

  async run({args, flags}: Input<typeof Build>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const baseTag = workspaceBaseTag(ws, flags['base-tag'])
    const ctx = await this.context(flags)
    const image = await buildRepoImage(ctx, ws, {baseTag, noCache: flags['no-cache'], ca: chooseCaCerts(undefined, process.env)})
    if (flags.json) this.outJson({image, baseTag})
    else this.out(image)
  }
}
