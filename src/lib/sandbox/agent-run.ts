/**
 * `agent-sandbox claude` and `agent-sandbox codex`: the agent in the
 * workspace's sandbox, started (and its image brought up to date) first, with
 * the autonomy flags of the image's `freeclaude` and `freecodex` aliases
 * (base-image/bashrc): the container is the sandbox, so the agent's own
 * permission prompts and its own sandbox go.
 */
import type {Context} from '../context.js'
import type {NetworkMode} from '../config/schema.js'
import type {Workspace} from '../workspace.js'
import {ensureRunning, execInSandbox, type SessionIo} from './session.js'

export interface AgentCli {
  /** The program in the image. */
  bin: string
  /** What its alias in base-image/bashrc adds. */
  autonomy: readonly string[]
  /** Subcommands whose own flags come after their name (`codex exec --flag …`). */
  subcommandsTakingFlags: readonly string[]
}

export const AGENTS = {
  claude: {bin: 'claude', autonomy: ['--dangerously-skip-permissions'], subcommandsTakingFlags: []},
  codex: {bin: 'codex', autonomy: ['--dangerously-bypass-approvals-and-sandbox'], subcommandsTakingFlags: ['exec', 'e']},
} as const satisfies Record<string, AgentCli>

export type AgentName = keyof typeof AGENTS

/**
 * The agent's command line: its program, its autonomy flags, and the user's
 * arguments. A subcommand that parses its own flags (`codex exec`) gets them
 * after its name. Pure.
 */
export function agentCommand(agent: AgentName, args: readonly string[]): string[] {
  const cli: AgentCli = AGENTS[agent]
  const [first, ...rest] = args
  if (first !== undefined && cli.subcommandsTakingFlags.includes(first)) return [cli.bin, first, ...cli.autonomy, ...rest]
  return [cli.bin, ...cli.autonomy, ...args]
}

export interface AgentRunOptions {
  branch?: string
  network?: NetworkMode
  /** The caller's stdin and stdout are terminals: the agent gets a TTY (through the engine CLI, which owns it). */
  tty: boolean
  term?: string
  /** Without a TTY, the agent reads and writes these (its output streams as it comes). */
  io: SessionIo
}

/** Run the agent in the sandbox (started if needed, its image rebuilt first when stale); resolves to the agent's exit code. */
export async function runAgent(ctx: Context, ws: Workspace, agent: AgentName, args: readonly string[], options: AgentRunOptions): Promise<number> {
  const session = {branch: options.branch, network: options.network, build: true}
  const command = agentCommand(agent, args)
  // On a terminal, execInSandbox starts (or checks) the sandbox first. Without one it goes straight to a running
  // sandbox, as a warm `exec` does: started (or checked) here, so that a stale image is rebuilt before the agent runs.
  if (options.tty) return execInSandbox(ctx, ws, command, {...session, attach: {tty: true, term: options.term}})
  await ensureRunning(ctx, ws, session)
  // Its network mode checked by ensureRunning: without one, execInSandbox checks nothing twice.
  return execInSandbox(ctx, ws, command, {...session, network: undefined, attach: {io: options.io}})
}
