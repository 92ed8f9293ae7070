/**
 * The credential files `<agent>-init-config --auth` writes into a config
 * volume, with every token in them replaced by its surrogate (agent-logins.ts):
 * the same files, the same fields, the same shapes. Pure.
 */
import {maskTokenResponse, type AgentLogin, type Vendor} from '../network/gateway/agent-logins.js'
import {UsageError} from '../errors.js'

/** The agents (volumes.ts Agent), by name. */
type Agent = 'codex' | 'claude'

export const AGENT_VENDOR: Record<Agent, Vendor> = {claude: 'anthropic', codex: 'openai'}

/**
 * A credential file with surrogates for its tokens (the OAuth tokens of
 * `.credentials.json` and `auth.json`, Codex's `OPENAI_API_KEY`, Claude Code's
 * `primaryApiKey` in `.claude.json`), and the logins they stand for.
 */
export function maskCredentialFile(agent: Agent, name: string, content: Buffer, key: string, source: string): {content: Buffer; logins: AgentLogin[]} {
  const masked = maskTokenResponse(AGENT_VENDOR[agent], 200, content.toString('utf8'), [], key, `${agent} ${name}`)
  if (!masked.ok) {
    throw new UsageError(`cannot mask ${source}: it is not JSON; nothing was changed`, {hint: `check the file, or import it as it is with --auth --plain`})
  }
  return {content: Buffer.from(`${masked.body}\n`), logins: masked.minted}
}
