/** `init`: create .agent-sandbox/ from the templates, then build the repo image. */
import {cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {templatesDir} from './assets.js'
import type {Engine} from './engine/index.js'
import type {GithubSettings} from './config/schema.js'
import {ConfigError, ConflictError} from './errors.js'
import {cloneUrl, parseRepoSlug, resolveAppConfig} from './github/app.js'
import {checkCloneTarget, cloneWithApp} from './github/clone.js'
import {buildRepoImage, ensureBaseImage} from './images.js'
import {silentReporter, type Reporter} from './reporter.js'
import {Labels, resolveWorkspace, type Workspace} from './workspace.js'
import {giveTo} from './protected.js'
import {removeSandbox, quoteArg} from './sandbox.js'

export interface InitOptions {
  force?: boolean
  baseTag: string
  reporter?: Reporter
}

export function renderRepoDockerfile(template: string, baseTag: string): string {
  return template.replace(/^ARG BASE_IMAGE_TAG=.*$/m, `ARG BASE_IMAGE_TAG=${baseTag}`)
}

/** The workspace's containers, found by label. */
async function workspaceContainers(engine: Engine, ws: Workspace) {
  return engine.containers.list({[Labels.workspace]: ws.path})
}

export async function initWorkspace(engine: Engine, ws: Workspace, options: InitOptions): Promise<{dir: string; image: string}> {
  const reporter = options.reporter ?? silentReporter
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
    const image = await buildRepoImage(engine, ws, {baseTag: options.baseTag, reporter})
    return {dir, image}
  } catch (error) {
    // Nothing half-made: a failed init leaves no .agent-sandbox/ behind.
    rmSync(dir, {recursive: true, force: true})
    throw error
  }
}

/**
 * `init --clone owner/repo [path]`: clone with the GitHub App's token
 * (github/clone.ts), then the normal init in the clone. Checks the base image
 * first; a failed init removes the clone it made, so nothing is half-made.
 */
export async function initFromClone(
  engine: Engine,
  repo: string,
  target: string,
  options: InitOptions & {github: GithubSettings; env?: NodeJS.ProcessEnv},
): Promise<{dir: string; image: string; path: string}> {
  const env = options.env ?? process.env
  const slug = parseRepoSlug(repo)
  const config = resolveAppConfig(options.github, env)
  if (!config) {
    throw new ConfigError('init --clone needs a GitHub App: github.appId, github.installationId and github.privateKeyPath are not set', {
      hint: 'set them in ~/.config/agent-sandbox/config.json or AGENT_SANDBOX_GITHUB_*; see docs/github-app.md',
    })
  }
  checkCloneTarget(target)
  await ensureBaseImage(engine, options.baseTag)
  ;(options.reporter ?? silentReporter).info(`cloning ${cloneUrl(config, slug)} into ${target}`)
  await cloneWithApp(config, slug, target, {env})
  try {
    const ws = resolveWorkspace(target)
    // A repository that already ships .agent-sandbox/ only needs its image built.
    if (existsSync(join(ws.path, '.agent-sandbox', 'Dockerfile'))) {
      const image = await buildRepoImage(engine, ws, {baseTag: options.baseTag, reporter: options.reporter})
      return {dir: join(ws.path, '.agent-sandbox'), image, path: ws.path}
    }
    const result = await initWorkspace(engine, ws, options)
    return {...result, path: ws.path}
  } catch (error) {
    rmSync(target, {recursive: true, force: true})
    throw error
  }
}
