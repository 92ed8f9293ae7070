import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {pathArg} from '../cli/flags.js'
import {codexLogout, describeFile} from '../lib/agents/volumes.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class CodexLogout extends Command {
  static override summary = 'Delete auth.json and profile.json from the Codex config volume.'
  static override description = `Removes the Codex credentials from the volume every sandbox of this workspace mounts at /home/node/.codex. The tokens are only deleted locally: they are not revoked on OpenAI's side (sign out of your sessions there to revoke them).`
  static override examples = ['<%= config.bin %> codex-logout', '<%= config.bin %> codex-logout ~/src/app --json']
  static override args = {path: pathArg}
  static override flags = {
    json: Flags.boolean({description: 'print the result as JSON'}),
  }

  async run({args, flags}: Input<typeof CodexLogout>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const engine = await this.engine(flags)
    const result = await codexLogout({engine, reporter: this.reporter}, ws)
    this.reporter.warn("server-side tokens are not revoked: this only deletes the local copies (sign out of your sessions at OpenAI to revoke them)")
    if (flags.json) return this.outJson({...result, serverSideRevoked: false})
    for (const file of result.files) this.out(describeFile(file))
  }
}
