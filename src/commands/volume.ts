import {Command, type Input} from '../cli/command.js'
import {pathArg} from '../cli/flags.js'
import {loadSettings} from '../lib/config/load.js'
import {Names, resolveWorkspace} from '../lib/workspace.js'

export default class Volume extends Command {
  static override summary = 'Print the agent config volume names (Claude Code, Codex), one per line.'
  static override examples = ['<%= config.bin %> volume', '<%= config.bin %> volume ~/src/app']
  static override args = {path: pathArg}

  async run({args}: Input<typeof Volume>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const {settings} = loadSettings({workspacePath: ws.path})
    this.out(Names.claudeVolume(ws, settings.sharedAgentConfig))
    this.out(Names.codexVolume(ws, settings.sharedAgentConfig))
  }
}
