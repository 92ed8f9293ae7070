/** `init`: create .agent-sandbox/ from the templates, then build the repo image. */
import {cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {templatesDir} from './assets.js'
import type {Engine} from './engine/index.js'
import {ConflictError} from './errors.js'
import {buildRepoImage, ensureBaseImage} from './images.js'
import {silentReporter, type Reporter} from './reporter.js'
import {Labels, type Workspace} from './workspace.js'
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
