import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {pathArg} from '../cli/flags.js'
import {describeFile, initAgentConfig} from '../lib/agents/volumes.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class CodexInitConfig extends Command {
  static override summary = 'Seed the Codex config volume (config.toml, the "high" profile, AGENTS.md); --auth imports the host login.'
  static override description = `Writes config.toml, high.config.toml (\`codex --profile high\`: model gpt-5, high reasoning effort) and AGENTS.md into the Codex volume mounted at /home/node/.codex, leaving existing files alone unless --force. With --auth, copies the host's ~/.codex/auth.json (always replacing the one in the volume) and profile.json (if present). Works whether or not a sandbox is running. The volume is the shared agent-sandbox-codex-config, or the workspace's own when its config sets "sharedAgentConfig": false.`
  static override examples = [
    '<%= config.bin %> codex-init-config',
    '<%= config.bin %> codex-init-config --auth',
    '<%= config.bin %> codex-init-config ~/src/app --force --json',
  ]
  static override args = {path: pathArg}
  static override flags = {
    auth: Flags.boolean({description: "import the host's ~/.codex/auth.json (always replaced) and profile.json"}),
    force: Flags.boolean({description: 'overwrite config.toml, high.config.toml, AGENTS.md and profile.json if they exist'}),
    json: Flags.boolean({description: 'print the result as JSON'}),
  }

  async run({args, flags}: Input<typeof CodexInitConfig>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const engine = await this.engine(flags)
    const result = await initAgentConfig({engine, reporter: this.reporter}, 'codex', ws, {auth: flags.auth, force: flags.force})
    if (flags.json) return this.outJson(result)
    for (const file of result.files) this.out(describeFile(file))
  }
}
