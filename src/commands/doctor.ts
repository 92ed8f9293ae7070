import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {branchFlag, pathArg} from '../cli/flags.js'
import {ExitCode} from '../lib/errors.js'
import {formatDoctor, runDoctor} from '../lib/sandbox/doctor.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Doctor extends Command {
  static override summary = 'Check that the running sandbox holds: try each way out as the sandbox user, and check the rules as root.'
  static override description =
    'Every check is a real, short attempt aimed only at the sandbox itself, its gateway or its resolvers: TCP/UDP/IPv6 egress, DNS outside the allowlist or around the sandbox resolver, raw sockets, and changing the firewall, the resolver or the network. Exits 1 if any check fails.'
  static override examples = ['<%= config.bin %> doctor', '<%= config.bin %> doctor ~/src/app --json']
  static override args = {path: pathArg}
  static override flags = {
    branch: branchFlag,
    json: Flags.boolean({description: 'print the checks as JSON'}),
  }

  async run({args, flags}: Input<typeof Doctor>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    const engine = await this.engine(flags)
    const report = await runDoctor({engine, reporter: this.reporter}, ws, {branch: flags.branch})
    if (flags.json) this.outJson(report)
    else this.out(formatDoctor(report))
    if (!report.ok) return ExitCode.failure
  }
}
