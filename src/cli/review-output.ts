/** `review`'s listing as text: each kept push with its commits, diffstat and flags; with --all, the pushes that went through. Pure. */
import type {KeptPush, ReviewListing, SandboxPushes} from '../lib/git/review.js'
import {FLAG_LABELS} from '../lib/git/review-flags.js'
import {quoteArg} from '../lib/util/shell-quote.js'

/** Files listed for one push before "… and N more". */
const MAX_FILES = 20

const short = (commit: string | null | undefined) => (commit ?? '').slice(0, 12)
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`

/** An engine time stamp to the second, in UTC. */
function when(at: string | undefined): string {
  return at ? `${at.slice(0, 10)} ${at.slice(11, 19)}Z` : ''
}

function sandboxName(sandbox: string, branch: string): string {
  return branch ? `${sandbox} (branch ${branch})` : sandbox
}

function standingOf(push: KeptPush): string {
  if (push.hostCommit === null) return `a new branch on the host`
  if (push.fastForward) return `a fast-forward of ${short(push.hostCommit)}`
  return `not a fast-forward: ${push.branch} moved on the host since (${plural(push.behind, 'commit')} the push has not)`
}

function formatKept(push: KeptPush, pathArg: string): string[] {
  const by = push.pushedBy ? `; pushed by ${sandboxName(push.pushedBy.sandbox, push.pushedBy.sandboxBranch)}${push.pushedBy.at ? ` at ${when(push.pushedBy.at)}` : ''}` : ''
  const lines = [`${push.branch}  ${short(push.commit)}  ${plural(push.commitCount, 'commit')}, ${standingOf(push)}${by}`]
  for (const c of push.commits) lines.push(`  ${short(c.commit)} ${c.subject}`)
  if (push.commitCount > push.commits.length) lines.push(`  … and ${plural(push.commitCount - push.commits.length, 'more commit')}`)
  const {files, insertions, deletions} = push.diffstat
  lines.push(`  ${plural(files, 'file')} changed, ${plural(insertions, 'insertion')}(+), ${plural(deletions, 'deletion')}(-)`)
  for (const f of push.files.slice(0, MAX_FILES)) lines.push(`    ${f.binary ? 'binary'.padEnd(13) : `+${f.added ?? 0} -${f.deleted ?? 0}`.padEnd(13)} ${f.status} ${f.path}`)
  if (push.files.length > MAX_FILES) lines.push(`    … and ${plural(push.files.length - MAX_FILES, 'more file')}`)
  if (push.flags.length) {
    lines.push('  flags:')
    for (const flag of push.flags) lines.push(`    ${FLAG_LABELS[flag.flag]}: ${flag.paths.join(', ')}`)
  }
  const b = quoteArg(push.branch)
  const approve = push.fastForward ? `approve ${b}${pathArg}` : `approve ${b}${pathArg} --merge`
  lines.push(`  agent-sandbox review show ${b}${pathArg} | ${approve} | reject ${b}${pathArg}`)
  return lines
}

function formatPushed(pushed: SandboxPushes[]): string[] {
  if (!pushed.length) return ['no push went straight through (the gates log the pushes since their sandbox last started)']
  const lines = ['pushed straight through, by sandbox (from the gates\' logs, since each sandbox last started):']
  for (const s of pushed) {
    lines.push(`  ${sandboxName(s.sandbox, s.sandboxBranch)}`)
    for (const p of s.pushes) {
      const range = /^0+$/.test(p.old) ? `new ${short(p.new)}` : `${short(p.old)}..${short(p.new)}`
      lines.push(`    ${when(p.at) ? `${when(p.at)}  ` : ''}${p.ref.replace(/^refs\/heads\//, '')}  ${range}${p.subject ? `  ${p.subject}` : ''}`)
    }
  }
  return lines
}

/** The listing as text; `pathArg` is the workspace argument the suggested commands repeat (empty for the current directory). */
export function formatPushReview(listing: ReviewListing, pathArg = ''): string {
  const path = pathArg ? ` ${quoteArg(pathArg)}` : ''
  const blocks: string[][] = listing.kept.length ? listing.kept.map((push) => formatKept(push, path)) : [[`no push waits for review in ${listing.workspace}`]]
  if (listing.pushed) blocks.push(formatPushed(listing.pushed))
  return blocks.map((b) => b.join('\n')).join('\n\n')
}
