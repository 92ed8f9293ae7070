import {Command, type Input} from '../cli/command.js'
import {branchFlag} from '../cli/flags.js'
import {Args} from '../cli/params.js'
import {UsageError} from '../lib/errors.js'
import {forwardPorts, parsePortSpec} from '../lib/sandbox/port-forward.js'
import {Names, resolveWorkspace} from '../lib/workspace.js'
import {quoteArg} from '../lib/util/shell-quote.js'

export default class Port extends Command {
  static override summary = 'Forward loopback ports on the host to ports inside a running sandbox, until Ctrl-C.'
  static override description =
    'Like kubectl port-forward: each PORT is the sandbox\'s port (the same on the host), or HOST:SANDBOX; 0:SANDBOX picks a free host port. The host side listens on 127.0.0.1 only. Each connection is relayed by one engine exec inside the sandbox, to 127.0.0.1:SANDBOX there; the sandbox and its firewall stay as they are. The first argument is the workspace when it is not a port.'
  static override examples = [
    '<%= config.bin %> port 3000',
    '<%= config.bin %> port 8080:3000 9229',
    '<%= config.bin %> port ~/src/app 0:5173',
    '<%= config.bin %> port --branch feat 3000',
  ]
  static override strict = false
  static override interruptible = true
  static override args = {path: Args.optional('workspace directory (default: the current directory), then one or more ports: PORT or HOST:SANDBOX')}
  static override flags = {branch: branchFlag}

  async run({flags, argv}: Input<typeof Port>): Promise<number> {
    const pathGiven = argv.length > 0 && !/^[\d:]+$/.test(argv[0])
    const specs = pathGiven ? argv.slice(1) : argv
    if (specs.length === 0) throw new UsageError('no port given', {hint: 'e.g. agent-sandbox port 3000, or agent-sandbox port 8080:3000'})
    const mappings = specs.map(parsePortSpec)
    const ws = resolveWorkspace(pathGiven ? argv[0] : undefined)
    const name = Names.container(ws, flags.branch)
    const start = `agent-sandbox start ${quoteArg(ws.path)}${flags.branch === undefined ? '' : ` --branch ${quoteArg(flags.branch)}`}`
    const forwarding = await forwardPorts(await this.context(flags), name, mappings, {start})
    for (const m of forwarding.bound) this.out(`Forwarding from 127.0.0.1:${m.host} -> ${m.container}`)
    // Ctrl-C is how forwarding ends: a normal end, exit 0.
    await forwarding.closed
    return 0
  }
}
