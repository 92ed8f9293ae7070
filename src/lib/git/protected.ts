/**
 * Protected paths: which host paths get mounted read-only over themselves.
 * A path that does not exist yet is still protected: its topmost missing
 * component gets an empty placeholder (a file if the name has an extension,
 * else a directory), so the agent cannot create it. Paths under `.git/` are
 * skipped when `.git` is not a directory (worktrees, submodules, no repo).
 */
import {chownSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync} from 'node:fs'
import {posix} from 'node:path'
import {DEFAULT_PROTECTED_PATHS} from '../config/schema.js'

export interface ProtectedMount {
  /** Path relative to the workspace root. */
  relative: string
}

export interface ProtectedPlan {
  mounts: ProtectedMount[]
  /** Placeholders to create (relative paths) before the container starts. */
  placeholders: Array<{relative: string; kind: 'file' | 'dir'}>
  skipped: Array<{relative: string; reason: string}>
}

type Kind = 'file' | 'dir' | 'empty-dir' | 'symlink' | 'other' | 'missing'

export function normaliseRelative(path: string): string {
  return posix.normalize(path).replace(/^(\.\/)+/, '').replace(/\/+$/, '')
}

function isDir(kind: Kind): boolean {
  return kind === 'dir' || kind === 'empty-dir'
}

function looksLikeFile(name: string): boolean {
  return /.\.[A-Za-z0-9]+$/.test(name)
}

/** Pure planning over a `kindOf(relative)` probe. */
export function planProtectedPaths(extra: string[], kindOf: (relative: string) => Kind): ProtectedPlan {
  const plan: ProtectedPlan = {mounts: [], placeholders: [], skipped: []}
  const seen = new Set<string>()
  for (const raw of [...DEFAULT_PROTECTED_PATHS, ...extra]) {
    const relative = normaliseRelative(raw)
    if (!relative || relative === '.' || relative.startsWith('..') || seen.has(relative)) continue
    seen.add(relative)
    const parts = relative.split('/')
    if (parts[0] === '.git' && parts.length > 1 && !isDir(kindOf('.git'))) {
      plan.skipped.push({relative, reason: '.git is not a directory'})
      continue
    }
    let missingAt = -1
    let blocked = false
    for (let i = 0; i < parts.length; i++) {
      const prefix = parts.slice(0, i + 1).join('/')
      const kind = kindOf(prefix)
      if (kind === 'missing') {
        missingAt = i
        break
      }
      if (kind === 'empty-dir' && i < parts.length - 1) {
        // An empty directory on the way (often our own placeholder): protect it
        // whole, exactly as a placeholder would, so the plan does not depend on
        // whether a previous start created it.
        plan.mounts.push({relative: prefix})
        blocked = true
        break
      }
      if (kind === 'symlink') {
        plan.skipped.push({relative, reason: `${prefix} is a symbolic link`})
        blocked = true
        break
      }
      if (i < parts.length - 1 && !isDir(kind)) {
        plan.skipped.push({relative, reason: `${prefix} is not a directory`})
        blocked = true
        break
      }
    }
    if (blocked) continue
    if (missingAt === -1) {
      plan.mounts.push({relative})
      continue
    }
    const top = parts.slice(0, missingAt + 1).join('/')
    const isLeaf = missingAt === parts.length - 1
    const kind = isLeaf && looksLikeFile(parts[missingAt]) ? 'file' : 'dir'
    if (!seen.has(`placeholder:${top}`)) {
      seen.add(`placeholder:${top}`)
      plan.placeholders.push({relative: top, kind})
      plan.mounts.push({relative: top})
    }
  }
  // A path inside another protected path is already covered.
  plan.mounts = plan.mounts.filter((m, i) => plan.mounts.findIndex((o) => o.relative === m.relative) === i)
  plan.mounts = plan.mounts.filter((m) => !plan.mounts.some((o) => o !== m && m.relative.startsWith(`${o.relative}/`)))
  return plan
}

export function fsKindOf(root: string): (relative: string) => Kind {
  return (relative) => {
    try {
      const st = lstatSync(posix.join(root, relative))
      if (st.isSymbolicLink()) return 'symlink'
      if (st.isDirectory()) return readdirSync(posix.join(root, relative)).length === 0 ? 'empty-dir' : 'dir'
      if (st.isFile()) return 'file'
      return 'other'
    } catch {
      return 'missing'
    }
  }
}

/** Create placeholders, owned by the workspace's owner when we run as root. */
export function createPlaceholders(root: string, placeholders: ProtectedPlan['placeholders'], owner?: {uid: number; gid: number}): void {
  for (const p of placeholders) {
    const path = posix.join(root, p.relative)
    if (p.kind === 'dir') mkdirSync(path, {recursive: true})
    else closeSync(openSync(path, 'a'))
    giveTo(path, owner)
  }
}

/** chown to the workspace owner, only when we are root and the owner is not. */
export function giveTo(path: string, owner?: {uid: number; gid: number}): void {
  if (owner && owner.uid !== 0 && process.getuid?.() === 0) chownSync(path, owner.uid, owner.gid)
}
