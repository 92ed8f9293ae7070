/**
 * What a reviewer of a kept push should look at first: the flags of its
 * changed files (CI workflows, lockfiles, hook-framework configuration,
 * `.agent-sandbox/`, files over 1 MiB, binary files, new executables), read
 * from `git diff --raw --numstat -z` and the new blobs' sizes. Pure.
 */
import {EMBEDDED_KEYS, isHookConfigPath} from './hook-config.js'

export const FLAG_KINDS = ['ci', 'lockfile', 'hook-config', 'agent-sandbox', 'large', 'binary', 'new-executable'] as const
export type FlagKind = (typeof FLAG_KINDS)[number]

/** How each flag reads in the listing. */
export const FLAG_LABELS: Record<FlagKind, string> = {
  ci: 'CI workflow',
  lockfile: 'lockfile',
  'hook-config': 'hook configuration',
  'agent-sandbox': '.agent-sandbox/',
  large: 'over 1 MiB',
  binary: 'binary',
  'new-executable': 'new executable',
}

/** A file over this many bytes (in the pushed commit) is flagged. */
export const LARGE_FILE_BYTES = 1024 * 1024

export interface ReviewFlag {
  flag: FlagKind
  paths: string[]
}

/** One changed file of a diff, from its raw and numstat records. */
export interface ChangedFile {
  path: string
  /** git's status letter: A, M, D, T (type change)… */
  status: string
  oldMode: string
  newMode: string
  /** The blob before and in the pushed commit (all zeros where the file is absent). */
  oldBlob: string
  newBlob: string
  /** Lines added and removed; undefined for a file git takes for binary. */
  added?: number
  deleted?: number
  binary: boolean
}

/**
 * The changed files in the output of `git diff --raw --numstat -z --no-renames --no-abbrev`:
 * raw records (`:<old mode> <new mode> <old blob> <new blob> <status>` NUL `<path>` NUL) then
 * numstat records (`<added>\t<deleted>\t<path>` NUL; `-` for a binary file), in the same order. Pure.
 */
export function parseRawNumstat(text: string): ChangedFile[] {
  const fields = text.split('\0')
  const files: ChangedFile[] = []
  const byPath = new Map<string, ChangedFile>()
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i]
    if (field.startsWith(':')) {
      const meta = /^:(\d{6}) (\d{6}) ([0-9a-f]+) ([0-9a-f]+) ([A-Z])\d*$/.exec(field)
      const path = fields[++i]
      if (!meta || path === undefined) continue
      const file: ChangedFile = {path, status: meta[5], oldMode: meta[1], newMode: meta[2], oldBlob: meta[3], newBlob: meta[4], binary: false}
      files.push(file)
      byPath.set(path, file)
      continue
    }
    const stat = /^(-|\d+)\t(-|\d+)\t([\s\S]*)$/.exec(field)
    if (!stat) continue
    const file = byPath.get(stat[3])
    if (!file) continue
    if (stat[1] === '-' || stat[2] === '-') file.binary = true
    else {
      file.added = Number(stat[1])
      file.deleted = Number(stat[2])
    }
  }
  return files
}

/** Sizes by blob from `git cat-file --batch-check` output (`<blob> blob <size>` lines; `<blob> missing` is skipped). Pure. */
export function parseBatchCheck(text: string): Map<string, number> {
  const sizes = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^([0-9a-f]+) blob (\d+)$/.exec(line.trim())
    if (m) sizes.set(m[1], Number(m[2]))
  }
  return sizes
}

/** CI configuration: GitHub Actions (workflows and local actions), GitLab, CircleCI, Travis, Azure Pipelines, Jenkins, Buildkite, Bitbucket, Drone, Woodpecker, AppVeyor, Gitea/Forgejo, Cirrus, Semaphore, Cloud Build, Codemagic, Tekton. */
const CI_DIRS = /^(\.github\/(workflows|actions)|\.gitea\/workflows|\.forgejo\/workflows|\.circleci|\.buildkite|\.woodpecker|\.semaphore|\.tekton|\.azure-pipelines|\.gitlab\/ci)\//
const CI_FILES = /^(\.gitlab-ci\.ya?ml|\.travis\.ya?ml|azure-pipelines\.ya?ml|bitbucket-pipelines\.ya?ml|\.drone\.ya?ml|\.woodpecker\.ya?ml|\.?appveyor\.ya?ml|\.cirrus\.ya?ml|cloudbuild\.ya?ml|codemagic\.ya?ml)$/
/** Jenkinsfiles at any depth (a pipeline may name one in a subdirectory). */
const CI_ANYWHERE = /(^|\/)Jenkinsfile(\.[^/]+)?$/

export function isCiPath(path: string): boolean {
  return CI_DIRS.test(path) || CI_FILES.test(path) || CI_ANYWHERE.test(path)
}

/** Dependency lockfiles, at any depth (monorepos have one per package). */
const LOCKFILES = new Set([
  'package-lock.json',
  'npm-shrinkwrap.json',
  'yarn.lock',
  'pnpm-lock.yaml',
  'bun.lock',
  'bun.lockb',
  'deno.lock',
  'Cargo.lock',
  'Gemfile.lock',
  'poetry.lock',
  'Pipfile.lock',
  'pdm.lock',
  'uv.lock',
  'pylock.toml',
  'composer.lock',
  'go.sum',
  'go.work.sum',
  'flake.lock',
  'mix.lock',
  'pubspec.lock',
  'Podfile.lock',
  'Package.resolved',
  'packages.lock.json',
  'paket.lock',
  'gradle.lockfile',
  'shard.lock',
  'Chart.lock',
  '.terraform.lock.hcl',
  'conda-lock.yml',
])

export function isLockfilePath(path: string): boolean {
  const name = path.slice(path.lastIndexOf('/') + 1)
  return LOCKFILES.has(name) || /^pylock\.[^/]+\.toml$/.test(name)
}

/** The hook-framework keys of a package.json's text (none for an absent file), as one comparable string (unparsable text is its own value). Pure. */
export function packageHookKeys(text: string | undefined): string {
  try {
    const parsed = JSON.parse(text ?? '{}') as unknown
    const json = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {}
    return JSON.stringify(Object.keys(EMBEDDED_KEYS).map((key) => [key, json[key] ?? null]))
  } catch {
    return `unparsable ${text}`
  }
}

export interface FlagContext {
  /** Sizes of the pushed commit's blobs (parseBatchCheck). */
  sizes: ReadonlyMap<string, number>
  /** The host's hooks directory when it is in the work tree (core.hooksPath, e.g. `.githooks`): its files are hook configuration. */
  hooksDir?: string
  /** package.json files whose hook-framework keys the push changes (packageHookKeys differs). */
  hookKeysChanged?: readonly string[]
}

const EXECUTABLE = '100755'

/** The flags of a push's changed files, in FLAG_KINDS order, each with its paths; none for a flag no file has. Pure. */
export function reviewFlags(files: readonly ChangedFile[], context: FlagContext): ReviewFlag[] {
  const found = new Map<FlagKind, string[]>(FLAG_KINDS.map((kind) => [kind, []]))
  const note = (kind: FlagKind, path: string) => {
    const paths = found.get(kind)!
    if (!paths.includes(path)) paths.push(path)
  }
  const hooksDir = context.hooksDir && context.hooksDir !== '.git' && !context.hooksDir.startsWith('.git/') ? context.hooksDir : undefined
  for (const file of files) {
    const {path} = file
    if (isCiPath(path)) note('ci', path)
    if (isLockfilePath(path)) note('lockfile', path)
    if (isHookConfigPath(path) || (hooksDir && path.startsWith(`${hooksDir}/`)) || context.hookKeysChanged?.includes(path)) note('hook-config', path)
    if (path === '.agent-sandbox' || path.startsWith('.agent-sandbox/')) note('agent-sandbox', path)
    if (file.status === 'D') continue
    if ((context.sizes.get(file.newBlob) ?? 0) > LARGE_FILE_BYTES) note('large', path)
    if (file.binary) note('binary', path)
    if (file.newMode === EXECUTABLE && file.oldMode !== EXECUTABLE) note('new-executable', path)
  }
  return FLAG_KINDS.filter((kind) => found.get(kind)!.length).map((kind) => ({flag: kind, paths: found.get(kind)!}))
}

export interface Diffstat {
  files: number
  insertions: number
  deletions: number
}

/** Files changed, lines inserted and deleted (binary files count as changed, with no lines). Pure. */
export function diffstatOf(files: readonly ChangedFile[]): Diffstat {
  return {
    files: files.length,
    insertions: files.reduce((sum, f) => sum + (f.added ?? 0), 0),
    deletions: files.reduce((sum, f) => sum + (f.deleted ?? 0), 0),
  }
}
