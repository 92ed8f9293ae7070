import {Flags} from '../cli/params.js'
import {Command, type Input} from '../cli/command.js'
import {pathArg} from '../cli/flags.js'
import {loadSettings} from '../lib/config/load.js'
import {detectHookConfig, formatHookConfig, fsHookProbe} from '../lib/git/hook-config.js'
import {looksSecret} from '../lib/util/secret-names.js'
import {resolveWorkspace} from '../lib/workspace.js'
import {quoteArg} from '../lib/util/shell-quote.js'

export default class Config extends Command {
  static override summary = 'Print the effective settings and where each value came from.'
  static override description =
    'Layers, highest first: flags, AGENT_SANDBOX_* environment variables, .agent-sandbox/config.json, ~/.config/agent-sandbox/config.json, defaults. A workspace file\'s values are marked trusted or untrusted; a setting that widens the sandbox from an untrusted file is shown as refused (commands that would apply it exit 2 until `agent-sandbox trust`).'
  static override examples = ['<%= config.bin %> config', '<%= config.bin %> config ~/src/app --json']
  static override args = {path: pathArg}
  static override flags = {json: Flags.boolean({description: 'print as JSON'})}

  async run({args, flags}: Input<typeof Config>): Promise<number | void> {
    const ws = resolveWorkspace(args.path)
    // Report, never refuse: this is where the user sees what an untrusted file would change.
    const loaded = loadSettings({workspacePath: ws.path, untrusted: 'report'})
    const trust = loaded.workspaceTrust
    const settings = {
      ...loaded.settings,
      env: Object.fromEntries(Object.entries(loaded.settings.env).map(([k, v]) => [k, looksSecret(k) ? '***' : v])),
    }
    const workspaceTrust = trust && {state: trust.state, via: trust.via, changed: trust.changed, refused: trust.refused}
    const detected = detectHookConfig(fsHookProbe(ws.path), ws.path)
    const hookConfig = {...detected, protect: loaded.settings.protectHookConfig ? detected.protect : []}
    if (flags.json) return this.outJson({settings, sources: loaded.sources, files: loaded.files, workspaceTrust, hookConfig})
    for (const [key, value] of Object.entries(settings)) {
      this.out(`${key.padEnd(18)} ${JSON.stringify(value)}  (${loaded.sources[key as keyof typeof loaded.sources].join(', ')})`)
    }
    this.out(`\nworkspace config: ${loaded.files.workspace}${trust ? ` (${trust.state}${trust.via === 'trustedPaths' ? ', by trustedPaths' : ''})` : ''}\nuser config:      ${loaded.files.user}`)
    this.out(`\nhook frameworks:  ${formatHookConfig(detected).join('\n                  ')}`)
    this.out(`read-only:        ${hookConfig.protect.join(', ') || (loaded.settings.protectHookConfig ? 'nothing' : 'nothing (protectHookConfig is false)')}`)
    if (detected.embedded.length) this.out(`run from HEAD:    package.json ${detected.embedded.map((k) => `"${k}"`).join(', ')}`)
    if (trust?.refused.length) {
      this.out(`\nrefused until you trust it (agent-sandbox trust ${quoteArg(ws.path)}):`)
      for (const c of trust.refused) this.out(`  ${c.key}: ${c.summary}`)
    }
  }
}
