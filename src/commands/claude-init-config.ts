import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {pathArg} from '../cli/flags.js'
import {describeFile, initAgentConfig} from '../lib/agents/volumes.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class ClaudeInitConfig extends Command {
  static override summary = 'Seed the Claude Code config volume (settings.json, CLAUDE.md); --auth imports the host login.'
  static override description = `Writes settings.json and CLAUDE.md into the Claude Code volume mounted at /home/node/.claude, leaving existing files alone unless --force. With --auth, copies the host's ~/.claude/.credentials.json (always replacing the one in the volume) and ~/.claude.json (kept as .claude/.claude.json, which the image links to ~/.claude.json), whichever exist. Works whether or not a sandbox is running. The volume is the shared agent-sandbox-claude-code-config, or the workspace's own when its config sets "sharedAgentConfig": false.`
  static override examples = [
    '<%= config.bin %> claude-init-config',
    '<%= config.bin %> claude-init-config --auth',
    '<%= config.bin %> claude-init-config ~/src/app --force --json',
  ]
  static override args = {path: pathArg}
  static override flags = {
    auth: Flags.boolean({description: "import the host's ~/.claude/.credentials.json (always replaced) and ~/.claude.json"}),
    force: Flags.boolean({description: 'overwrite settings.json, CLAUDE.md and .claude.json if they exist'}),
    json: Flags.boolean({description: 'print the result as JSON'}),
  }

  async run({args, flags}: Input<typeof ClaudeInitConfig>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const engine = await this.engine(flags)
    const result = await initAgentConfig({engine, reporter: this.reporter}, 'claude', ws, {auth: flags.auth, force: flags.force})
    if (flags.json) return this.outJson(result)
    for (const file of result.files) this.out(describeFile(file))
  }
}
