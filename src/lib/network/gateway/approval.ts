/**
 * Refusals the user can lift: a host not on the allowlist, or a method or path
 * outside a host's httpRules. Each is a pending approval; its one line (the
 * body of the 403 the agent gets, and the pending entry the user sees) names
 * the exact command that grants it. Pure: shared by the gateway and the host.
 */
import {quoteArg} from '../../util/shell-quote.js'

/** What a refusal is: the log entry's fields, or the request as judged. */
export interface Refused {
  method: string
  host: string
  path: string
  status: number
  rule: string
}

/** The refusal of a host by the allowlist (policy.ts). */
export const NOT_ALLOWLISTED = 'not allowlisted'

const isRuleRefusal = (rule: string) => /^(method \S+|path \S+) not in /.test(rule)

/**
 * The path a grant of a method or path refusal admits: the path as judged (normalised: no ../ or %2e%2e).
 * None when it holds a character --paths reads as a pattern or a separator (`*`, `?`, `,`): a grant of it
 * would admit more than the refused request, so such a refusal waits for no approval.
 */
export function grantedPath(r: Refused): string | undefined {
  if (!isRuleRefusal(r.rule) || !r.method || !r.path) return undefined
  const path = /^path (\S+) not in /.exec(r.rule)?.[1] ?? r.path
  return /[*?,]/.test(path) ? undefined : path
}

/** The command that grants a refused request, or undefined for a refusal no grant lifts (fronting, a bad head, a secret, a path that reads as a pattern). */
export function grantCommand(r: Refused): string | undefined {
  if (r.status !== 403 || !r.host) return undefined
  if (r.rule === NOT_ALLOWLISTED) return `agent-sandbox firewall allow ${quoteArg(r.host)}`
  const path = grantedPath(r)
  if (path === undefined) return undefined
  return `agent-sandbox firewall allow ${quoteArg(r.host)} --methods ${quoteArg(r.method.toUpperCase())} --paths ${quoteArg(path)}`
}

/** The one line of a pending approval: what was refused and why, and the command that grants it. */
export function approvalLine(what: string, rule: string, command: string): string {
  return `${what} refused: ${rule}; waiting for the user's approval: ${command}`
}

/** Why a request was refused, as the agent reads it: with the approval line where a grant lifts it. */
export function refusalReason(r: Refused, ruled: boolean): string {
  const command = grantCommand(r)
  const what = ruled ? `${r.method} ${r.host}${r.path}` : r.host || 'request'
  return command ? approvalLine(what, r.rule, command) : `${what} refused: ${r.rule}`
}

/** The line of a DNS name the firewall refused (in `firewall status` and `firewall pending`): the same form as the gateway's 403. */
export function dnsApprovalLine(name: string): string {
  return `agent-sandbox firewall: ${approvalLine(name, `DNS name ${NOT_ALLOWLISTED}`, `agent-sandbox firewall allow ${quoteArg(name)}`)}`
}
