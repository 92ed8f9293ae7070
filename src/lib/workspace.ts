/**
 * A workspace: the real path of a host directory, its MD5 and every name and
 * label derived from them. Pure apart from `resolveWorkspace`, which stats the path.
 */
import {lstatSync, realpathSync, statSync} from 'node:fs'
import {basename, join, resolve} from 'node:path'
import {NotInitialisedError, UsageError} from './errors.js'
import {md5Hex as md5} from './util/hash.js'
import {quoteArg} from './util/shell-quote.js'

export const LABEL_PREFIX = 'dev.agent-sandbox'
export const Labels = {
  managed: `${LABEL_PREFIX}.managed`,
  workspace: `${LABEL_PREFIX}.workspace`,
  mode: `${LABEL_PREFIX}.mode`,
  branch: `${LABEL_PREFIX}.branch`,
  kind: `${LABEL_PREFIX}.kind`,
  hash: `${LABEL_PREFIX}.hash`,
  repo: `${LABEL_PREFIX}.repo`,
  volume: `${LABEL_PREFIX}.volume`,
  /** The sandbox uses the GitHub App's tokens ('1'). */
  ghapp: `${LABEL_PREFIX}.ghapp`,
  /** How the sandbox does git: `gate` (its own git directory, pushes to the host through the gate), `throwaway` (its own, discarded with a one-shot container), `protected` (no repository: the workspace's .git is read-only). */
  git: `${LABEL_PREFIX}.git`,
  /** The hook frameworks detected at creation and the files protected for them (JSON of hookConfigLabel). */
  hookConfig: `${LABEL_PREFIX}.hook-config`,
  /** The sandbox runs rootless Podman for the agent ('1'; docs/security.md, nested containers). */
  nested: `${LABEL_PREFIX}.nested`,
  /** On a gate container: the name of the sandbox it serves. */
  gateOf: `${LABEL_PREFIX}.gate-of`,
  /** The sandbox's working directory inside, its network mode and its limits (JSON), for `list`. */
  workdir: `${LABEL_PREFIX}.workdir`,
  network: `${LABEL_PREFIX}.network`,
  limits: `${LABEL_PREFIX}.limits`,
  /** A digest of everything that shapes the container (specHash): a stopped sandbox whose spec changed is recreated. */
  spec: `${LABEL_PREFIX}.spec`,
  /** On images: what a no-op rebuild compares (build-key.ts), and the base image's tool versions (JSON). */
  buildKey: `${LABEL_PREFIX}.build-key`,
  versions: `${LABEL_PREFIX}.versions`,
  /** On a base image: the digest of the CA certificates it was built to trust (ca.ts caCertsDigest; absent: none added). */
  caCerts: `${LABEL_PREFIX}.ca-certs`,
  /** On images (the base's, inherited): which revision of the CLI-to-image protocol its scripts speak (IMAGE_RUNTIME). */
  runtime: `${LABEL_PREFIX}.runtime`,
  /** On an egress gateway container: the name of the sandbox it serves. */
  gatewayOf: `${LABEL_PREFIX}.gateway-of`,
  /** The masked secrets a sandbox holds surrogates of (JSON [{name, hosts}]): a gateway made anew knows them all. */
  masked: `${LABEL_PREFIX}.masked`,
} as const

/**
 * The revision of what the CLI and the image's scripts expect of each other,
 * labelled on the base image (Labels.runtime) and so on every image built from
 * it. 2: a one-shot run's entrypoint waits for its egress gateway's port (1, no
 * label: for a marker the CLI wrote).
 */
export const IMAGE_RUNTIME = 2

export type SandboxMode = 'bind' | 'branch'

export interface Workspace {
  /** Absolute real path on the host. */
  path: string
  /** Directory name as it is (may hold spaces or unicode). */
  repoName: string
  /** repoName made safe for engine object names. */
  repoSlug: string
  /** MD5 of `path`. */
  hash: string
  /** Owner of the directory on the host (the sandbox user is renumbered to it). */
  uid: number
  gid: number
}

/** The MD5 (hex) that names a workspace's containers. */
export {md5}

/** Lower-case [a-z0-9_.-], starting with an alphanumeric; never empty. */
export function slug(text: string, max = 40): string {
  const cleaned = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .replace(/-+$/, '')
    .slice(0, max)
    .replace(/[^a-z0-9]+$/, '')
  return cleaned || 'workspace'
}

export function describeWorkspace(path: string, uid = 0, gid = 0): Workspace {
  const repoName = basename(path) || 'root'
  return {path, repoName, repoSlug: slug(repoName), hash: md5(path), uid, gid}
}

/** Resolve a user-given path to a workspace; refuses what does not exist or is not a directory. */
export function resolveWorkspace(input: string | undefined, cwd = process.cwd()): Workspace {
  const given = resolve(cwd, input ?? '.')
  let real: string
  try {
    real = realpathSync(given)
  } catch {
    throw new UsageError(`workspace path does not exist: ${given}`, {hint: 'pass the path of an existing directory'})
  }
  const stats = statSync(real)
  if (!stats.isDirectory()) {
    throw new UsageError(`workspace path is not a directory: ${real}`, {hint: 'pass the path of a directory, not a file'})
  }
  return describeWorkspace(real, stats.uid, stats.gid)
}

/**
 * A branch name made safe for a directory and a container name: `/` and white
 * space become `__`, anything else outside [A-Za-z0-9._-] becomes `-`. When
 * that loses information, a short hash of the real name is appended, so two
 * different branches never share a worktree or a container.
 */
export function sanitizeBranch(branch: string): string {
  let safe = branch.replace(/[/\s]+/g, '__').replace(/[^A-Za-z0-9._-]/g, '-')
  safe = safe.replace(/^[._-]+/, '')
  const lossy = safe !== branch || /-[0-9a-f]{8}$/.test(branch) || safe.length > 60
  safe = safe.slice(0, 60)
  return lossy ? `${safe || 'branch'}-${md5(branch).slice(0, 8)}` : safe
}

/** Validate a branch name the way `git check-ref-format --branch` would, without running git. */
export function validateBranch(branch: string): void {
  const bad =
    branch === '' ||
    branch === '@' ||
    branch.startsWith('-') ||
    branch.startsWith('/') ||
    branch.endsWith('/') ||
    branch.endsWith('.') ||
    branch.endsWith('.lock') ||
    branch.includes('..') ||
    branch.includes('//') ||
    branch.includes('@{') ||
    /[\x00-\x20\x7f~^:?*[\\]/.test(branch) ||
    branch.split('/').some((part) => part.startsWith('.') || part.endsWith('.lock'))
  if (bad) {
    throw new UsageError(`not a valid git branch name: ${JSON.stringify(branch)}`, {
      hint: 'see `git check-ref-format --help` for what a branch name may contain',
    })
  }
}

export const Names = {
  container(ws: Workspace, branch?: string): string {
    return branch === undefined
      ? `agent-sandbox-${ws.repoSlug}-${ws.hash}`
      : `agent-sandbox-${ws.repoSlug}-${sanitizeBranch(branch)}-${ws.hash}`
  },
  image(ws: Workspace): string {
    return `agent-sandbox-${ws.repoSlug}-${ws.hash}`
  },
  historyVolume(ws: Workspace): string {
    return `agent-sandbox-${ws.hash}-history`
  },
  /** The agent's own git directory (bind mode), mounted over the workspace's .git. */
  gitVolume(ws: Workspace): string {
    return `agent-sandbox-${ws.hash}-git`
  },
  /** The nested Podman's images and containers (nestedContainers), so they outlive a restart. */
  nestedVolume(ws: Workspace): string {
    return `agent-sandbox-${ws.hash}-containers`
  },
  /** The push gate of a sandbox (git-gate.sh). */
  gate(sandboxName: string): string {
    return `${sandboxName}-gate`
  },
  /** The egress gateway of a sandbox (src/gateway.ts). */
  gateway(sandboxName: string): string {
    return `${sandboxName}-gateway`
  },
  shelfVolume(ws: Workspace): string {
    return `agent-sbx-repo-${ws.hash}`
  },
  claudeVolume(ws: Workspace, shared: boolean): string {
    return shared ? 'agent-sandbox-claude-code-config' : `agent-sandbox-${ws.hash}-claude-code-config`
  },
  codexVolume(ws: Workspace, shared: boolean): string {
    return shared ? 'agent-sandbox-codex-config' : `agent-sandbox-${ws.hash}-codex-config`
  },
  baseImage(tag: string): string {
    return `agent-sandbox-base:${tag}`
  },
}

export function workspaceLabels(ws: Workspace, branch?: string): Record<string, string> {
  return {
    [Labels.managed]: 'true',
    [Labels.workspace]: ws.path,
    [Labels.hash]: ws.hash,
    [Labels.repo]: ws.repoName,
    [Labels.mode]: branch === undefined ? 'bind' : 'branch',
    [Labels.branch]: branch ?? '',
  }
}

/** A workspace is set up once it has .agent-sandbox/Dockerfile (agent-sandbox init). */
export function isInitialised(ws: Workspace): boolean {
  // lstat, not existsSync: a link (even a dangling one) is there, and the build's trust check refuses it.
  try {
    lstatSync(join(ws.path, '.agent-sandbox', 'Dockerfile'))
    return true
  } catch {
    return false
  }
}

export function requireInitialised(ws: Workspace): void {
  if (!isInitialised(ws)) {
    throw new NotInitialisedError(`${ws.path} is not set up for agent-sandbox (no .agent-sandbox/Dockerfile)`, {
      hint: `run: agent-sandbox init ${quoteArg(ws.path)}`,
    })
  }
}
