import {Flags} from '@oclif/core'
import {BaseCommand} from '../cli/base.js'
import {allowHostNetworkFlag, branchFlag, limitFlags, networkFlag, pathArg} from '../cli/flags.js'
import {noCommand, runOneShot} from '../cli/one-shot.js'
import {ExitCode} from '../lib/errors.js'

export default class Run extends BaseCommand {
  static override summary = 'Run one command in a fresh sandbox container, then remove it.'
  static override description = `Same image, mounts, guardrails and firewall as start. Output streams, the exit code is passed through; on timeout the container is killed and the exit code is ${ExitCode.timeout}. If the sandbox cannot be set up (e.g. the firewall), the command never starts.`
  static override examples = [
    '<%= config.bin %> run -- npm test',
    "<%= config.bin %> run --timeout 10m --memory 2g --pids-limit 512 -- sh -c 'make && make check'",
    '<%= config.bin %> run --env OPENAI_API_KEY --network firewall -- codex exec "fix the build"',
  ]
  static override strict = false
  static override args = {path: pathArg}
  static override flags = {
    'allow-host-network': allowHostNetworkFlag,
    branch: branchFlag,
    ...limitFlags,
    // One name per --env (not greedy): `--env A ./repo` means the workspace ./repo, as on the fast path.
    env: Flags.string({description: "pass the host's value of this variable (repeatable); the value is never printed", multiple: true, multipleNonGreedy: true}),
    keep: Flags.boolean({description: 'keep the container after the command exits'}),
    network: networkFlag,
    timeout: Flags.string({description: 'kill the run after this long, e.g. 30s, 10m, 1h'}),
  }

  async run(): Promise<void> {
    // Not strict: everything after `--` is the command, flags included.
    const split = this.argv.indexOf('--')
    if (split === -1 || split === this.argv.length - 1) throw noCommand()
    const {args, flags} = await this.parse({...Run, strict: true} as typeof Run, this.argv.slice(0, split))
    this.exit(await runOneShot(args.path, this.argv.slice(split + 1), flags, {engine: () => this.engine(flags), reporter: this.reporter, secrets: this.secrets}))
  }
}
