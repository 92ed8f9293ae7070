/** `claude` and `codex`: one command per agent, the same work (src/lib/sandbox/agent-run.ts). */
import {runAgent, type AgentName} from '../lib/sandbox/agent-run.js'
import type {NetworkMode} from '../lib/config/schema.js'
import {resolveWorkspace} from '../lib/workspace.js'
import {Command, type CommandClass, type Input} from './command.js'
import {branchFlag, networkFlag} from './flags.js'
import {stdio} from './output.js'
import {Flags} from './params.js'

export function agentCommandClass(agent: AgentName, text: {summary: string; autonomy: string; examples: string[]}): CommandClass {
  return class AgentSession extends Command {
    static override summary = text.summary
    static override description = `Starts the workspace's sandbox if needed (building its image when missing, rebuilding it when .agent-sandbox/Dockerfile, its context or the base image changed), then runs ${agent} in the workspace with ${text.autonomy}, as the ${agent === 'claude' ? 'freeclaude' : 'freecodex'} alias does inside. Every argument after this command's own flags goes to ${agent} as it is; the workspace is the current directory unless --workspace names another. With a terminal, ${agent} gets a TTY; otherwise its output streams as it comes. The exit code is ${agent}'s. For ${agent}'s own help: ${agent === 'claude' ? 'agent-sandbox claude -- --help' : 'agent-sandbox codex -- --help'}.`
    static override examples = text.examples
    static override passThrough = true
    static override interruptible = true
    static override flags = {
      branch: branchFlag,
      network: networkFlag,
      workspace: Flags.string({description: 'workspace directory (default: the current directory)'}),
    }

    async run({flags, command}: Input<typeof AgentSession>): Promise<number> {
      const ws = resolveWorkspace(flags.workspace)
      const io = {stdin: process.stdin, stdout: stdio('stdout'), stderr: stdio('stderr')}
      return runAgent(await this.context(flags), ws, agent, command ?? [], {
        branch: flags.branch,
        network: flags.network as NetworkMode | undefined,
        tty: Boolean(process.stdin.isTTY && process.stdout.isTTY),
        term: process.env.TERM,
        io,
      })
    }
  }
}
