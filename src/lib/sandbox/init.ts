/**
 * `init`: create .agent-sandbox/ from the templates, record it as trusted (we
 * wrote it), then build the repo image. `init --clone` never trusts an
 * .agent-sandbox/ that came with the clone.
 */
import {cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {templatesDir} from '../util/assets.js'
import type {Engine} from '../engine/index.js'
import type {GithubSettings} from '../config/schema.js'
import {ConfigError, ConflictError} from '../errors.js'
import {recordTrust, renderRepoDockerfile, revokeTrust, snapshotDir} from '../config/trust.js'
import {reviewWorkspace} from '../config/trust-review.js'
import type {ConfigChange} from '../config/widening.js'
import {cloneUrl, parseRepoSlug, resolveAppConfig} from '../github/app.js'
import {checkCloneTarget, cloneWithApp} from '../github/clone.js'
import {buildRepoImage, ensureBaseImage} from '../images/build.js'
import {silentReporter} from '../reporter.js'
import {Labels, resolveWorkspace, type Workspace} from '../workspace.js'
import {quoteArg} from '../util/shell-quote.js'
import {giveTo} from '../git/protected.js'
import {removeSandbox} from './lifecycle.js'
import type {Context} from '../context.js'

export interface InitOptions {
  force?: boolean
  baseTag: string
}

export {renderRepoDockerfile} from '../config/trust.js'

/** The workspace's containers, found by label. */
async function workspaceContainers(engine: Engine, ws: Workspace) {
  return engine.containers.list({[Labels.workspace]: ws.path})
}

export async function initWorkspace(ctx: Context, ws: Workspace, options: InitOptions): Promise<{dir: string; image: string}> {
  const {engine} = ctx
  const reporter = ctx.reporter ?? silentReporter
  const dir = join(ws.path, '.agent-sandbox')
  if (existsSync(dir) && !options.force) {
    throw new ConflictError(`${dir} already exists`, {hint: `run \`agent-sandbox build ${quoteArg(ws.path)}\` to rebuild, or pass --force to start over`})
  }
  // Check what can fail before changing anything.
  await ensureBaseImage(engine, options.baseTag)
  if (existsSync(dir)) {
    for (const c of await workspaceContainers(engine, ws)) {
      reporter.info(`removing container ${c.name}`)
      await engine.containers.remove(c.id, {force: true})
    }
    await removeSandbox({engine}, ws).catch(() => undefined)
    rmSync(dir, {recursive: true, force: true})
  }
  mkdirSync(dir)
  try {
    writeFileSync(join(dir, 'Dockerfile'), renderRepoDockerfile(readFileSync(join(templatesDir, 'Dockerfile'), 'utf8'), options.baseTag))
    cpSync(join(templatesDir, 'config.json'), join(dir, 'config.json'))
    for (const path of [dir, join(dir, 'Dockerfile'), join(dir, 'config.json')]) giveTo(path, ws)
    recordTrust(ws.path, snapshotDir(ws.path), 'init', ctx.env)
    const image = await buildRepoImage(ctx, ws, {baseTag: options.baseTag})
    return {dir, image}
  } catch (error) {
    // Nothing half-made: a failed init leaves no .agent-sandbox/ behind, and no approval of it.
    rmSync(dir, {recursive: true, force: true})
    try {
      revokeTrust(ws.path, ctx.env)
    } catch {
      // the store cannot be read: nothing of ours is in it
    }
    throw error
  }
}

/**
 * `init --clone owner/repo [path]`: clone with the GitHub App's token
 * (github/clone.ts), then the normal init in the clone. Checks the base image
 * first; a failed init removes the clone it made, so nothing is half-made.
 */
export interface CloneInitResult {
  dir: string
  path: string
  /** The image, unless the clone's own Dockerfile awaits approval. */
  image?: string
  /** .agent-sandbox/ came with the clone: it is not trusted (nothing of it was approved). */
  shipped: boolean
  /** The shipped config's settings that will be refused until `agent-sandbox trust`. */
  refused: ConfigChange[]
}

export async function initFromClone(
  ctx: Context,
  repo: string,
  target: string,
  options: InitOptions & {github: GithubSettings},
): Promise<CloneInitResult> {
  const env = ctx.env ?? process.env
  const slug = parseRepoSlug(repo)
  const config = resolveAppConfig(options.github, env)
  if (!config) {
    throw new ConfigError('init --clone needs a GitHub App: github.appId, github.installationId and github.privateKeyPath are not set', {
      hint: 'set them in ~/.config/agent-sandbox/config.json or AGENT_SANDBOX_GITHUB_*; see docs/github-app.md',
    })
  }
  checkCloneTarget(target)
  await ensureBaseImage(ctx.engine, options.baseTag)
  ;(ctx.reporter ?? silentReporter).info(`cloning ${cloneUrl(config, slug)} into ${target}`)
  await cloneWithApp(config, slug, target, {env})
  try {
    const ws = resolveWorkspace(target)
    const dir = join(ws.path, '.agent-sandbox')
    // A repository that ships .agent-sandbox/ keeps it, untrusted: it is the repository's input, not the user's.
    if (existsSync(dir)) {
      const review = reviewWorkspace(ws.path, env)
      const refused = review.changes.filter((c) => c.widens)
      // Only init's own template is built unasked (its steps are ours); anything else waits for `trust`.
      if (review.assessment.build !== 'template') return {dir, path: ws.path, shipped: true, refused}
      const image = await buildRepoImage({...ctx, env}, ws, {baseTag: options.baseTag})
      return {dir, image, path: ws.path, shipped: true, refused}
    }
    const result = await initWorkspace({...ctx, env}, ws, options)
    return {...result, path: ws.path, shipped: false, refused: []}
  } catch (error) {
    rmSync(target, {recursive: true, force: true})
    throw error
  }
}
