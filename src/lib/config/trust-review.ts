/**
 * What `agent-sandbox trust` shows before it asks: the changes a workspace's
 * config makes, the state of its Dockerfile, and a diff against the approved
 * copy (or the template).
 */
import {join} from 'node:path'
import {parseConfigText, readConfigFile, userConfigPath, workspaceDefaults} from './layers.js'
import {agentSandboxDir, assess, CONFIG_FILE, DOCKERFILE, lowerSettings, snapshotDir, templateDockerfile, type PartState, type Snapshot, type TrustAssessment} from './trust.js'
import {readTrustStore} from './trust-store.js'
import {workspaceChanges, type ConfigChange} from './widening.js'

export interface Review {
  path: string
  snapshot: Snapshot
  assessment: TrustAssessment
  /** What the config file changes compared with the user's settings (empty without a file). */
  changes: ConfigChange[]
  /** A unified diff of the Dockerfile against the approved copy, or the template when none was approved. */
  dockerfileDiff?: string
  /** Everything is approved already. */
  trusted: boolean
}

/** What `trust` shows: read .agent-sandbox/ once, compare it with the user's settings and the approved copy. */
export function reviewWorkspace(workspacePath: string, env: NodeJS.ProcessEnv = process.env): Review {
  const snapshot = snapshotDir(workspacePath)
  const userLayer = readConfigFile(userConfigPath(env))
  const store = readTrustStore(env)
  const assessment = assess(workspacePath, snapshot, userLayer, store, env)
  const file = join(agentSandboxDir(workspacePath), CONFIG_FILE)
  const layer = snapshot.config ? parseConfigText(snapshot.config.toString('utf8'), file) : undefined
  const changes = layer ? workspaceChanges(layer, lowerSettings(userLayer, workspaceDefaults(workspacePath, userLayer, env))) : []
  let dockerfileDiff: string | undefined
  if (snapshot.dockerfile && assessment.build !== 'template' && assessment.build !== 'approved') {
    const text = snapshot.dockerfile.toString('utf8')
    const approved = assessment.record?.dockerfile
    const base = approved ?? templateDockerfile(/^ARG BASE_IMAGE_TAG=(\S+)$/m.exec(text)?.[1] ?? 'latest')
    dockerfileDiff = unifiedDiff(base, text, approved === undefined ? 'template Dockerfile' : 'approved Dockerfile', '.agent-sandbox/Dockerfile')
  }
  const trusted =
    (assessment.config === 'approved' || assessment.config === 'absent') && (assessment.build === 'approved' || assessment.build === 'template' || assessment.build === 'absent')
  return {path: workspacePath, snapshot, assessment, changes, dockerfileDiff, trusted}
}

/** A unified diff, line-based (longest common subsequence; Dockerfiles are small). */
export function unifiedDiff(before: string, after: string, fromLabel: string, toLabel: string, context = 3): string {
  const a = before.split('\n')
  const b = after.split('\n')
  const lcs: number[][] = Array.from({length: a.length + 1}, () => new Array<number>(b.length + 1).fill(0))
  for (let i = a.length - 1; i >= 0; i--) for (let j = b.length - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1])
  // Each op with the 1-based line numbers it has in `before` and `after` (0 where it has none).
  const ops: Array<{op: ' ' | '-' | '+'; line: string; ai: number; bi: number}> = []
  for (let i = 0, j = 0; i < a.length || j < b.length; ) {
    if (i < a.length && j < b.length && a[i] === b[j]) ops.push({op: ' ', line: a[i++], ai: i, bi: ++j})
    else if (i < a.length && (j === b.length || lcs[i + 1][j] >= lcs[i][j + 1])) ops.push({op: '-', line: a[i++], ai: i, bi: 0})
    else ops.push({op: '+', line: b[j++], ai: 0, bi: j})
  }
  const changed = ops.flatMap((o, k) => (o.op === ' ' ? [] : [k]))
  const out = [`--- ${fromLabel}`, `+++ ${toLabel}`]
  for (let h = 0; h < changed.length; ) {
    let last = h
    while (last + 1 < changed.length && changed[last + 1] - changed[last] <= 2 * context + 1) last++
    const start = Math.max(0, changed[h] - context)
    const end = Math.min(ops.length, changed[last] + context + 1)
    const hunk = ops.slice(start, end)
    // Line numbers before the hunk: the lines of each side consumed by the ops before it.
    const aBefore = ops.slice(0, start).filter((o) => o.op !== '+').length
    const bBefore = ops.slice(0, start).filter((o) => o.op !== '-').length
    const aLen = hunk.filter((o) => o.op !== '+').length
    const bLen = hunk.filter((o) => o.op !== '-').length
    out.push(`@@ -${aLen ? aBefore + 1 : aBefore},${aLen} +${bLen ? bBefore + 1 : bBefore},${bLen} @@`)
    for (const o of hunk) out.push(`${o.op}${o.line}`)
    h = last + 1
  }
  return out.join('\n')
}

const PART_WORDS: Record<PartState | 'template', string> = {
  absent: 'none',
  approved: 'trusted',
  changed: 'changed since you trusted it',
  new: 'not trusted yet',
  template: "init's template",
}

/** What `trust` prints before it asks: each change the config makes, the Dockerfile's state and diff. Pure. */
export function formatReview(review: Review): string[] {
  const {assessment} = review
  const lines = [`workspace ${review.path}`]
  lines.push(`.agent-sandbox/config.json: ${PART_WORDS[assessment.config]}`)
  if (assessment.config !== 'absent') {
    if (review.changes.length === 0) lines.push('  (changes nothing compared with your settings)')
    for (const c of review.changes) lines.push(`  ${c.widens ? 'widens ' : 'narrows'}  ${c.key}: ${c.summary}`)
  }
  lines.push(`.agent-sandbox/Dockerfile: ${PART_WORDS[assessment.build]}`)
  const others = assessment.buildChanged.filter((f) => f !== DOCKERFILE)
  if (assessment.build === 'changed' && others.length) lines.push(`  other build files that differ: ${others.join(', ')}`)
  if (review.dockerfileDiff) lines.push(...review.dockerfileDiff.split('\n').map((l) => `  ${l}`))
  if (assessment.build !== 'template' && assessment.build !== 'absent') lines.push('  (a build runs these steps with an open network)')
  return lines
}
