import {Command, type Input} from '../cli/command.js'
import {allowHostNetworkFlag, branchFlag, limitFlags, limitsFrom, nestedFlag, networkFlag, pathArg, registryFlag, shapeFlags} from '../cli/flags.js'
import {Flags} from '../cli/params.js'
import {stdio} from '../cli/output.js'
import {StreamRedactor} from '../cli/redact-stream.js'
import {formatRequest} from '../lib/network/gateway/log.js'
import {checkLimits, type NetworkMode} from '../lib/config/schema.js'
import {ExitCode, UsageError} from '../lib/errors.js'
import {parseDuration} from '../lib/sandbox/ephemeral-container.js'
import {runOneShot} from '../lib/sandbox/one-shot-run.js'
import {resolveWorkspace} from '../lib/workspace.js'

export default class Run extends Command {
  static override summary = 'Run one command in a fresh sandbox container, then remove it.'
  static override description = `Same image, mounts, guardrails and firewall as start; with network firewall, an egress gateway of its own (httpRules, masked secretEnv), removed with the run, and what it refused is listed on stderr at the end. Output streams, the exit code is passed through; on timeout the container is killed and the exit code is ${ExitCode.timeout}. If the sandbox cannot be set up (e.g. the firewall or its gateway), the command never starts.`
  static override examples = [
    '<%= config.bin %> run -- npm test',
    "<%= config.bin %> run --timeout 10m --memory 2g --pids-limit 512 -- sh -c 'make && make check'",
    '<%= config.bin %> run --env OPENAI_API_KEY --network firewall -- codex exec "fix the build"',
  ]
  static override takesCommand = true
  static override interruptible = true
  static override args = {path: pathArg}
  static override flags = {
    'allow-host-network': allowHostNetworkFlag,
    branch: branchFlag,
    ...limitFlags,
    // One name per --env: `--env A ./repo` means the workspace ./repo.
    env: Flags.string({description: "pass the host's value of this variable (repeatable); the value is never printed", multiple: true}),
    keep: Flags.boolean({description: 'keep the container after the command exits'}),
    nested: nestedFlag,
    network: networkFlag,
    registry: registryFlag,
    timeout: Flags.string({description: 'kill the run after this long, e.g. 30s, 10m, 1h'}),
  }

  async run({args, flags, command}: Input<typeof Run>): Promise<number> {
    if (!command?.length) throw new UsageError('no command given', {hint: 'put the command after --, e.g. agent-sandbox run -- npm test'})
    let timeoutMs: number | undefined
    if (flags.timeout !== undefined) {
      try {
        timeoutMs = parseDuration(flags.timeout)
      } catch {
        throw new UsageError(`--timeout is not a duration: ${flags.timeout}`, {hint: 'use e.g. 30s, 10m or 1h'})
      }
    }
    const limits = limitsFrom(flags)
    const shape = shapeFlags(flags)
    const checked = checkLimits(limits ?? {})
    if (!checked.success) throw new UsageError(`invalid limit: ${checked.issue.field}: ${checked.issue.message}`, {hint: 'e.g. --memory 512m --cpus 1.5 --pids-limit 256'})
    for (const name of flags.env ?? []) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new UsageError(`--env takes a variable name, not ${JSON.stringify(name)}`, {hint: 'export NAME=value, then pass --env NAME'})
      if (process.env[name] === undefined) throw new UsageError(`--env ${name}: ${name} is not set in this environment`, {hint: `export ${name} first`})
    }
    const ws = resolveWorkspace(args.path)
    let out: StreamRedactor | undefined
    let err: StreamRedactor | undefined
    const result = await runOneShot(await this.context(flags), ws, {
      command,
      branch: flags.branch,
      network: flags.network as NetworkMode | undefined,
      limits,
      envNames: flags.env,
      timeoutMs,
      keep: flags.keep,
      allowHostNetwork: flags['allow-host-network'],
      shape: {nestedContainers: shape?.nestedContainers, registries: shape?.registries},
      onCreated: ({secrets}) => {
        this.secrets.push(...secrets)
        out = new StreamRedactor(secrets, (t) => stdio('stdout').write(t))
        err = new StreamRedactor(secrets, (t) => stdio('stderr').write(t))
      },
      onStdout: (c) => out?.push(c),
      onStderr: (c) => err?.push(c),
    })
    out?.end()
    err?.end()
    if (result.kept) this.reporter.info(`kept container ${result.name}`)
    // The run's gateway goes with it: what it refused is said here, as `firewall log` would show it.
    for (const e of result.blocked) this.fail(`egress gateway refused: ${formatRequest(e)}`)
    if (result.timedOut) {
      if (result.atPidsLimit) this.fail(`the pids limit was reached (the sandbox was at its limit of ${limits?.pids ?? 'its'} processes)`)
      this.fail(`timed out after ${flags.timeout}; the container was killed`)
      return ExitCode.timeout
    }
    if (result.oomKilled) this.fail(`the command was killed: out of memory${limits?.memory ? ` (limit ${limits.memory})` : ''}`)
    if (result.pidsLimitHits > 0) this.fail(`the pids limit was reached (${result.pidsLimitHits} forks refused)`)
    return result.exitCode
  }

  /** What the kernel did to the run, in the CLI's own voice: `agent-sandbox: …` on stderr. */
  private fail(message: string): void {
    stdio('stderr').write(`agent-sandbox: ${message}\n`)
  }
}
