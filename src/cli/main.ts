/**
 * The dispatcher: every command line that is not a request for help runs here,
 * through the command's own class (src/commands) and the one parser
 * (src/cli/parse.ts). bin/run.cjs loads this module and the one command a line
 * names, each as a CommonJS bundle of its own (scripts/bundle-cli.mjs): loading
 * oclif costs more than a warm `exec`, and so does loading every command's code
 * (docs/PERFORMANCE.md). Help, topics and unknown commands go to oclif, which
 * reads the same classes through its manifest.
 */
import type {CommandClass} from './command.js'

/**
 * Every command, by oclif id (`firewall:allow` is src/commands/firewall/allow.ts).
 * scripts/bundle-cli.mjs refuses a build where this list and src/commands differ.
 */
export const COMMAND_IDS: readonly string[] = [
  'build',
  'build-base',
  'checkout',
  'claude',
  'claude-init-config',
  'codex',
  'codex-init-config',
  'codex-logout',
  'config',
  'doctor',
  'exec',
  'firewall:allow',
  'firewall:deny',
  'firewall:log',
  'firewall:pending',
  'firewall:status',
  'init',
  'list',
  'port',
  'prune',
  'review',
  'review:approve',
  'review:reject',
  'review:show',
  'rm',
  'run',
  'shell',
  'show-run',
  'start',
  'stop',
  'token-daemon',
  'trust',
  'volume',
  'watch',
]

/**
 * The command's file under src/commands, without its extension: `firewall/allow`.
 * A command that is also a topic (`review`, with `review show`…) is its folder's
 * `index`, as oclif names it. Pure.
 */
export function commandFile(id: string): string {
  const file = id.split(':').join('/')
  return COMMAND_IDS.some((other) => other.startsWith(`${id}:`)) ? `${file}/index` : file
}

const HELP_FLAGS = new Set(['--help', '-h'])

/** Which command `argv` names, and its own arguments; undefined for help, a topic alone, or an unknown command. Pure. */
export function route(argv: readonly string[]): {id: string; rest: string[]} | undefined {
  const end = argv.indexOf('--')
  if ((end === -1 ? argv : argv.slice(0, end)).some((token) => HELP_FLAGS.has(token))) return undefined
  // Topics are separated by a space (`firewall allow`), as oclif's topicSeparator says.
  for (const words of [2, 1]) {
    const id = argv.slice(0, words).join(':')
    if (argv.length >= words && COMMAND_IDS.includes(id)) return {id, rest: argv.slice(words)}
  }
  return undefined
}

/**
 * Run the command `argv` names; resolves to its exit code once its output is
 * flushed (Command.run), or undefined to leave the line to oclif. `load` gives the command's
 * class from its file (bin/run.cjs: the command's own bundle).
 */
export async function runCli(argv: readonly string[], load: (file: string) => CommandClass | Promise<CommandClass>): Promise<number | undefined> {
  const routed = route(argv)
  if (!routed) return undefined
  const command = await load(commandFile(routed.id))
  command.id = routed.id
  return command.run(routed.rest)
}
