/**
 * Hook frameworks and their configuration: which of husky,
 * lefthook, pre-commit, overcommit, lint-staged, commitlint and
 * simple-git-hooks a repository uses, and which of its files configure them.
 * `start` mounts those files read-only (the protected-path mechanism), so
 * that the agent cannot weaken the hooks its own commits run.
 *
 * Pure over a probe of the workspace (`fsHookProbe` for the real one), and
 * cheap: one read of the root and of the hooks directory, the hooks' text and
 * package.json; no git process.
 *
 * Configuration inside files the agent must be able to edit (package.json's
 * `lint-staged`, `commitlint`, `simple-git-hooks` and `husky` keys) is not
 * mounted: the hook dispatcher (base-image/hook-dispatch.sh) runs the hooks
 * with those keys as HEAD has them. Files that do not exist get no
 * placeholder: an empty `.lintstagedrc` would itself be configuration, and
 * a config file created inside after `start` is refused by the dispatcher.
 */
import {lstatSync, readdirSync, readFileSync} from 'node:fs'
import {posix} from 'node:path'

export const FRAMEWORKS = ['husky', 'lefthook', 'pre-commit', 'overcommit', 'lint-staged', 'commitlint', 'simple-git-hooks'] as const
export type Framework = (typeof FRAMEWORKS)[number]

/** package.json keys that configure a hook framework; hooks run with HEAD's (hook-dispatch.sh keeps the same list). */
export const EMBEDDED_KEYS: Record<string, Framework> = {
  'lint-staged': 'lint-staged',
  commitlint: 'commitlint',
  'simple-git-hooks': 'simple-git-hooks',
  husky: 'husky',
}

/**
 * Configuration files and directories at the repository's root, by framework.
 * hook-dispatch.sh and gate-hooks/pre-receive match the same names.
 */
const ROOT_CONFIG: Array<[Framework, RegExp]> = [
  ['husky', /^\.husky$/],
  ['lefthook', /^\.?lefthook(-local)?\.(ya?ml|json|jsonc|toml)$/],
  ['lefthook', /^\.lefthook(-local)?$/],
  ['pre-commit', /^\.pre-commit-config\.ya?ml$/],
  ['overcommit', /^\.overcommit\.yml$/],
  ['lint-staged', /^(\.lintstagedrc(\.(json|ya?ml|[cm]?js|[cm]?ts))?|lint-staged\.config\.[cm]?[jt]s)$/],
  ['commitlint', /^(\.commitlintrc(\.(json|ya?ml|[cm]?js|[cm]?ts))?|commitlint\.config\.[cm]?[jt]s)$/],
  ['simple-git-hooks', /^\.?simple-git-hooks\.([cm]?js|json)$/],
]
/** The same tools' files under `.config/` (lefthook, and cosmiconfig's `.config/<name>rc`). */
const DOT_CONFIG: Array<[Framework, RegExp]> = [
  ['lefthook', /^lefthook(-local)?\.(ya?ml|json|jsonc|toml)$/],
  ['lint-staged', /^lintstagedrc(\.(json|ya?ml|[cm]?js|[cm]?ts))?$/],
  ['commitlint', /^commitlintrc(\.(json|ya?ml|[cm]?js|[cm]?ts))?$/],
]
/** Directories at the root that hold a framework's hooks or configuration (overcommit's repository hooks: .git-hooks). */
const CONFIG_DIRS = /^(\.husky|\.lefthook(-local)?|\.git-hooks)$/

/**
 * Whether a path in a commit (relative to the repository's root) configures a
 * hook framework, as gate-hooks/pre-receive matches them: the directories
 * above, the files `.config/` holds, and the configuration files' names at any
 * depth (lint-staged and commitlint read nested ones in a monorepo). Pure.
 */
export function isHookConfigPath(path: string): boolean {
  const parts = path.split('/')
  if (parts.length > 1 && CONFIG_DIRS.test(parts[0])) return true
  if (parts.length === 2 && parts[0] === '.config' && DOT_CONFIG.some(([, re]) => re.test(parts[1]))) return true
  const name = parts[parts.length - 1]
  return ROOT_CONFIG.some(([, re]) => re.test(name) && !CONFIG_DIRS.test(name))
}

/** What a hook script that belongs to a framework says. */
const HOOK_TEXT: Array<[Framework, RegExp]> = [
  ['husky', /\bhusky\b/],
  ['lefthook', /lefthook/],
  ['pre-commit', /pre-commit\.com|\bpre_commit\b|\bpre-commit\s+(hook-impl|run)\b/],
  ['overcommit', /\bovercommit\b/i],
  ['lint-staged', /\blint-staged\b/],
  ['commitlint', /\bcommitlint\b/],
  ['simple-git-hooks', /SKIP_SIMPLE_GIT_HOOKS|\bsimple-git-hooks\b/],
]

type Kind = 'file' | 'dir' | 'empty-dir' | 'symlink' | 'other' | 'missing'

export interface HookProbe {
  kindOf(relative: string): Kind
  /** A file's text (the first 64 KiB), or undefined. */
  read(relative: string): string | undefined
  /** Names in a directory; [] when it is missing. */
  list(relative: string): string[]
}

export interface HookConfigReport {
  /** The hooks directory git uses, relative to the workspace (`.git/hooks` unless core.hooksPath says otherwise); absent when it is outside the workspace. */
  hooksDir?: string
  /** Each framework found, with what showed it. */
  frameworks: Array<{name: Framework; evidence: string[]}>
  /** Existing paths, relative to the workspace, to mount read-only. */
  protect: string[]
  /** package.json keys that configure hooks, run from HEAD (never mounted: package.json is the agent's to edit). */
  embedded: string[]
}

/** core.hooksPath from a git config file's text (the last one wins, as in git); includes are not followed. */
export function hooksPathFromConfig(text: string): string | undefined {
  let section = ''
  let value: string | undefined
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    const header = /^\[\s*([A-Za-z0-9.-]+)(\s+"[^"]*")?\s*\]/.exec(line)
    if (header) {
      section = header[2] ? '' : header[1].toLowerCase()
      continue
    }
    if (section !== 'core') continue
    const kv = /^hookspath\s*=\s*(.*)$/i.exec(line)
    if (kv) value = unquote(kv[1].replace(/\s+[#;].*$/, '').trim())
  }
  return value || undefined
}

function unquote(text: string): string {
  return text.replace(/^"(.*)"$/, '$1').replace(/^'(.*)'$/, '$1')
}

/** The hooks directory relative to the workspace, or undefined when it is outside it. */
export function hooksDirOf(hooksPath: string | undefined, workspacePath: string): string | undefined {
  if (!hooksPath) return '.git/hooks'
  if (hooksPath.startsWith('/')) {
    if (!hooksPath.startsWith(`${workspacePath}/`)) return undefined
    return normalise(hooksPath.slice(workspacePath.length + 1))
  }
  if (hooksPath.startsWith('~')) return undefined
  const relative = normalise(hooksPath)
  return relative.startsWith('..') ? undefined : relative
}

function normalise(path: string): string {
  return posix.normalize(path).replace(/^(\.\/)+/, '').replace(/\/+$/, '')
}

/**
 * Files a hook runs or sources by a path: `. path`, `source path`,
 * `sh|bash|node path`, `./path`; `$(dirname "$0")` and `${0%/*}` are the
 * hook's own directory. Paths relative to the work tree (a hook's cwd).
 */
export function referencedPaths(text: string, hookDir: string): string[] {
  const found: string[] = []
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (!line || line.startsWith('#')) continue
    const command = /^(?:\.|source|(?:exec\s+)?(?:sh|bash|dash|zsh|node))\s+(?!-)(.+)$/.exec(line) ?? /^(?:exec\s+)?(\.{1,2}\/.+)$/.exec(line)
    if (!command) continue
    const rest = command[1].replace(/["']/g, '').replace(/\$\(dirname\s+(--\s+)?\$0\)|\$\{0%\/\*\}|`dirname\s+(--\s+)?\$0`/g, hookDir)
    const path = rest.split(/[\s;&|]/)[0]
    if (!path || /[$`*?(]/.test(path)) continue
    found.push(path)
  }
  return found
}

export function detectHookConfig(probe: HookProbe, workspacePath: string): HookConfigReport {
  const evidence = new Map<Framework, string[]>()
  const note = (name: Framework, what: string) => {
    const list = evidence.get(name) ?? []
    if (!list.includes(what)) list.push(what)
    evidence.set(name, list)
  }
  const protect: string[] = []
  const add = (relative: string) => {
    if (!protect.includes(relative)) protect.push(relative)
  }

  const hooksPath = probe.kindOf('.git') === 'dir' ? hooksPathFromConfig(probe.read('.git/config') ?? '') : undefined
  const hooksDir = hooksDirOf(hooksPath, workspacePath)
  if (hooksPath && hooksDir?.split('/')[0] === '.husky') note('husky', `core.hooksPath ${hooksPath}`)
  // A hooks directory in the work tree is hook configuration itself (.git/hooks is the host's, read-only already).
  if (hooksDir && !hooksDir.startsWith('.git/') && hooksDir !== '.git' && isDir(probe.kindOf(hooksDir))) add(hooksDir.split('/')[0] === '.husky' ? '.husky' : hooksDir)

  for (const name of probe.list('')) {
    for (const [framework, re] of ROOT_CONFIG) {
      if (!re.test(name)) continue
      const kind = probe.kindOf(name)
      if (kind === 'missing' || kind === 'symlink' || kind === 'other') continue
      // An empty directory is no configuration (and may be our own placeholder for .husky).
      if (isDir(kind) && probe.list(name).length === 0) continue
      note(framework, name)
      add(name)
    }
  }
  if (isDir(probe.kindOf('.config'))) {
    for (const name of probe.list('.config')) {
      for (const [framework, re] of DOT_CONFIG) {
        const relative = `.config/${name}`
        if (!re.test(name) || probe.kindOf(relative) !== 'file') continue
        note(framework, relative)
        add(relative)
      }
    }
  }

  // The hooks themselves: which frameworks they run, and what they source.
  const scripts: Array<[string, string]> = []
  const readHooks = (dir: string) => {
    for (const name of probe.list(dir)) {
      if (name.endsWith('.sample') || name.startsWith('.')) continue
      const relative = `${dir}/${name}`
      if (probe.kindOf(relative) !== 'file') continue
      const text = probe.read(relative)
      if (text !== undefined) scripts.push([relative, text])
    }
  }
  if (hooksDir) readHooks(hooksDir)
  // husky's hooks (.husky/_/*) only call the scripts beside them (.husky/<hook>).
  if (hooksDir?.startsWith('.husky/') || (evidence.has('husky') && hooksDir !== '.husky')) readHooks('.husky')
  for (const [relative, text] of scripts) {
    for (const [framework, re] of HOOK_TEXT) if (re.test(text)) note(framework, `hook ${relative}`)
    for (const path of referencedPaths(text, posix.dirname(relative))) {
      const target = normalise(path.startsWith('/') ? (path.startsWith(`${workspacePath}/`) ? path.slice(workspacePath.length + 1) : '..') : path)
      if (!target || target === '.' || target.startsWith('..') || target === '.git' || target.startsWith('.git/') || target === 'package.json' || target.split('/').includes('node_modules')) continue
      const kind = probe.kindOf(target)
      if (kind === 'file' || isDir(kind)) add(target)
    }
  }
  // overcommit's repository hooks live in .git-hooks/.
  if (evidence.has('overcommit') && isDir(probe.kindOf('.git-hooks'))) add('.git-hooks')

  const embedded: string[] = []
  const pkg = probe.kindOf('package.json') === 'file' ? probe.read('package.json') : undefined
  if (pkg) {
    try {
      const json = JSON.parse(pkg) as unknown
      if (json && typeof json === 'object' && !Array.isArray(json)) {
        for (const [key, framework] of Object.entries(EMBEDDED_KEYS)) {
          if (key in json) {
            embedded.push(key)
            note(framework, `package.json "${key}"`)
          }
        }
      }
    } catch {
      // Not JSON: nothing configured there that a tool could read either.
    }
  }

  const frameworks = FRAMEWORKS.filter((f) => evidence.has(f)).map((name) => ({name, evidence: evidence.get(name) ?? []}))
  return {...(hooksDir ? {hooksDir} : {}), frameworks, protect: protect.filter((p) => !protect.some((o) => p.startsWith(`${o}/`))), embedded}
}

function isDir(kind: Kind): boolean {
  return kind === 'dir' || kind === 'empty-dir'
}

const MAX_READ = 64 * 1024

export function fsHookProbe(root: string): HookProbe {
  return {
    kindOf(relative) {
      try {
        const st = lstatSync(posix.join(root, relative))
        if (st.isSymbolicLink()) return 'symlink'
        if (st.isDirectory()) return 'dir'
        if (st.isFile()) return 'file'
        return 'other'
      } catch {
        return 'missing'
      }
    },
    read(relative) {
      try {
        const buffer = readFileSync(posix.join(root, relative))
        return buffer.subarray(0, MAX_READ).toString('utf8')
      } catch {
        return undefined
      }
    },
    list(relative) {
      try {
        return readdirSync(relative ? posix.join(root, relative) : root)
      } catch {
        return []
      }
    },
  }
}

/** One line per framework, for `config` and `start`'s report. */
export function formatHookConfig(report: HookConfigReport): string[] {
  if (!report.frameworks.length) return ['none detected']
  return report.frameworks.map((f) => `${f.name}: ${f.evidence.join(', ')}`)
}

/** What the sandbox's label keeps (doctor reads it back): framework names, protected paths, package.json keys. */
export function hookConfigLabel(report: HookConfigReport): string {
  return JSON.stringify({frameworks: report.frameworks.map((f) => f.name), protect: report.protect, embedded: report.embedded})
}

export function parseHookConfigLabel(text: string | undefined): {frameworks: string[]; protect: string[]; embedded: string[]} | undefined {
  if (!text) return undefined
  try {
    const v = JSON.parse(text) as {frameworks?: unknown; protect?: unknown; embedded?: unknown}
    const strings = (x: unknown) => (Array.isArray(x) ? x.filter((s): s is string => typeof s === 'string') : [])
    return {frameworks: strings(v.frameworks), protect: strings(v.protect), embedded: strings(v.embedded)}
  } catch {
    return undefined
  }
}
