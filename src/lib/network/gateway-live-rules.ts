/**
 * The httpRules `firewall allow` adds to a running sandbox's gateway, kept on
 * the host as `live-rules.json` in the sandbox's gateway CA directory
 * (gateway-ca.ts), so that a gateway made anew gets them again while the
 * sandbox has not restarted; `rm` removes them with the CA.
 */
import {mkdirSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {gatewayCaDir} from './gateway-ca.js'
import {parseRuleLines, type HttpRule} from './gateway/rules.js'

/** Live rules are kept per start of the sandbox: they last until it restarts, as live allowlist additions do. */
interface LiveRules {
  startedAt: string
  rules: HttpRule[]
}

function liveRulesFile(container: string, env: NodeJS.ProcessEnv): string {
  return join(gatewayCaDir(container, env), 'live-rules.json')
}

/** The rules added live since the sandbox started at `startedAt` (none after a restart). */
export function liveRules(container: string, startedAt: string, env: NodeJS.ProcessEnv = process.env): HttpRule[] {
  try {
    const saved = JSON.parse(readFileSync(liveRulesFile(container, env), 'utf8')) as LiveRules
    return saved.startedAt === startedAt ? parseRuleLines(saved.rules.map((r) => JSON.stringify(r)).join('\n')) : []
  } catch {
    return []
  }
}

export function recordLiveRule(container: string, startedAt: string, rule: HttpRule, env: NodeJS.ProcessEnv = process.env): void {
  const dir = gatewayCaDir(container, env)
  mkdirSync(dir, {recursive: true, mode: 0o700})
  const saved: LiveRules = {startedAt, rules: [...liveRules(container, startedAt, env), rule]}
  const tmp = `${liveRulesFile(container, env)}.${process.pid}.tmp`
  writeFileSync(tmp, `${JSON.stringify(saved)}\n`, {mode: 0o600})
  renameSync(tmp, liveRulesFile(container, env))
}
