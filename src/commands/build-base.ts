import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {buildBase, caCertPathsFromEnv, defaultToolVersions} from '../lib/images/build.js'

export default class BuildBase extends Command {
  static override summary = 'Build the shared base image agent-sandbox-base:<tag>.'
  static override description =
    'Tool versions given as `latest` (or a range) are resolved to concrete npm versions first, so that layers cache. Build output streams to stderr.'
  static override examples = [
    '<%= config.bin %> build-base',
    '<%= config.bin %> build-base --tag 2026-11-22 --claude-code-version 2.1.0 --codex-version latest',
    '<%= config.bin %> build-base --ca-cert /etc/ssl/certs/ca-certificates.crt',
  ]
  static override flags = {
    'ast-grep-version': Flags.string({description: 'version of @ast-grep/cli (default: the Dockerfile default, resolved)'}),
    'base-image': Flags.string({description: 'the image to build FROM', default: 'debian:trixie-slim'}),
    'ca-cert': Flags.string({description: 'PEM certificate or bundle to trust inside the image (repeatable; env AGENT_SANDBOX_CA_CERTS)', multiple: true}),
    'claude-code-version': Flags.string({description: 'version of @anthropic-ai/claude-code'}),
    'codex-version': Flags.string({description: 'version of @openai/codex'}),
    'git-delta-version': Flags.string({description: 'git-delta: "debian" (Debian package, no download) or a release to download from GitHub'}),
    json: Flags.boolean({description: 'print the result as JSON'}),
    tag: Flags.string({description: 'tag of the base image (default: env AGENT_SANDBOX_BASE_TAG, else latest)'}),
  }

  async run({flags}: Input<typeof BuildBase>): Promise<number | void> {
    const defaults = defaultToolVersions()
    const ctx = await this.context(flags)
    const result = await buildBase(ctx, {
      tag: flags.tag ?? (process.env.AGENT_SANDBOX_BASE_TAG || 'latest'),
      baseImage: flags['base-image'],
      versions: {
        claudeCode: flags['claude-code-version'] ?? defaults.claudeCode,
        codex: flags['codex-version'] ?? defaults.codex,
        astGrep: flags['ast-grep-version'] ?? defaults.astGrep,
      },
      gitDeltaVersion: flags['git-delta-version'] ?? defaults.gitDelta,
      caCertPaths: [...caCertPathsFromEnv(process.env), ...(flags['ca-cert'] ?? [])],
    })
    if (flags.json) this.outJson(result)
    else this.out(`${result.image} (claude-code ${result.versions.claudeCode}, codex ${result.versions.codex}, ast-grep ${result.versions.astGrep}, git-delta ${result.versions.gitDelta})`)
  }
}
