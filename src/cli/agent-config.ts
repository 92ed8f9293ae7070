/** `claude-init-config` and `codex-init-config`: one command per agent, the same work. */
import type {Agent} from '../lib/agents/volumes.js'
import {describeFile, initAgentConfig} from '../lib/agents/volumes.js'
import {resolveWorkspace} from '../lib/workspace.js'
import {UsageError} from '../lib/errors.js'
import {Command, type CommandClass, type Input} from './command.js'
import {pathArg} from './flags.js'
import {Flags} from './params.js'

export function initConfigCommand(agent: Agent, text: {summary: string; description: string; auth: string; force: string}): CommandClass {
  return class InitConfig extends Command {
    static override summary = text.summary
    static override description = text.description
    static override examples = [
      `<%= config.bin %> ${agent}-init-config`,
      `<%= config.bin %> ${agent}-init-config --auth`,
      `<%= config.bin %> ${agent}-init-config --auth --plain`,
      `<%= config.bin %> ${agent}-init-config ~/src/app --force --json`,
    ]
    static override args = {path: pathArg}
    static override flags = {
      auth: Flags.boolean({description: text.auth}),
      force: Flags.boolean({description: text.force}),
      json: Flags.boolean({description: 'print the result as JSON'}),
      plain: Flags.boolean({
        description: 'with --auth: copy the real credentials into the volume, where the agent can read them (by default it gets surrogates, and only the egress gateway the real values)',
      }),
    }

    async run({args, flags}: Input<typeof InitConfig>): Promise<void> {
      if (flags.plain && !flags.auth) throw new UsageError('--plain applies to --auth only', {hint: `run ${agent}-init-config --auth --plain`})
      const ws = resolveWorkspace(args.path)
      const result = await initAgentConfig(await this.context(flags), agent, ws, {auth: flags.auth, plain: flags.plain, force: flags.force})
      if (flags.json) return this.outJson(result)
      for (const file of result.files) this.out(describeFile(file))
      if (result.credentials === 'masked') this.out('credentials: surrogates in the volume; the real values are kept on this host and given to the egress gateway only')
    }
  }
}
