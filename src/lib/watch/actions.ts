/**
 * What `watch`'s keys do to a pending approval: allow its host (once, for ten
 * minutes, for the sandbox's life, or saved to the workspace's config) through
 * `firewall allow`'s library call, or deny it as `firewall deny` does. Opening
 * a kept push's review is the command layer's: it hands the terminal over.
 */
import type {Context} from '../context.js'
import {UsageError} from '../errors.js'
import {allowDomains} from '../network/firewall-allow.js'
import {denyPending, type PendingApproval} from '../network/pending.js'
import {workspaceOf} from './gather.js'
import {allowOptions, type AllowScope, type WatchedSandbox} from './model.js'

const SCOPE_TEXT: Record<AllowScope, string> = {
  once: 'for one request',
  'ten-minutes': 'for 10 minutes',
  life: "for the sandbox's life",
  save: "and saved to the workspace's config",
}

/** Allow a pending approval's host in its sandbox; resolves to what was done, in a line. */
export async function allowPending(ctx: Context, sandbox: WatchedSandbox, approval: PendingApproval, scope: AllowScope): Promise<string> {
  const {ws, branch} = workspaceOf(sandbox)
  const what = approval.kind === 'rule' ? `${approval.method ?? ''} ${approval.host}${approval.path ?? ''}` : approval.host
  // A method or path refused by the host's httpRules is granted as a rule for that method and the path as
  // judged (pending.ts: never one that reads as a pattern), and a rule lasts for the sandbox's life.
  if (approval.kind === 'rule' && (scope === 'once' || scope === 'ten-minutes')) {
    throw new UsageError(`${what}: a method or path is allowed for the sandbox's life or saved, not ${SCOPE_TEXT[scope]}`, {hint: "press the key for the sandbox's life, or save it"})
  }
  const rule = approval.kind === 'rule' && approval.method && approval.path ? {rule: {methods: approval.method, paths: approval.path}} : {}
  const result = await allowDomains(ctx, ws, [approval.host], {branch, ...rule, ...allowOptions(scope)})
  const already = result.added.length === 0 && result.rules.every((r) => r.action !== 'added')
  return `${sandbox.name}: ${already ? `${what} was already allowed` : `allowed ${what} ${SCOPE_TEXT[scope]}`}`
}

/** Deny a pending approval: it leaves the queue until the host is refused again. */
export async function denyApproval(ctx: Context, sandbox: WatchedSandbox, approval: PendingApproval): Promise<string> {
  const {ws, branch} = workspaceOf(sandbox)
  const {cleared} = await denyPending(ctx, ws, [approval.host], {branch})
  return `${sandbox.name}: ${cleared.length ? `denied ${approval.host}` : `${approval.host} was no longer pending`}`
}
