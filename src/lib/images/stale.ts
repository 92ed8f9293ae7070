/**
 * Never a stale image: before a sandbox is started or entered, its per-repo
 * image is rebuilt when what it is built from (.agent-sandbox/Dockerfile, its
 * context, the base image) changed since it was built; the build key
 * (build-key.ts) says so. A running sandbox keeps the image it was created
 * from: when that is older than the workspace's image, it is named, with the
 * commands that recreate it.
 */
import {assertBuildTrusted} from '../config/trust.js'
import type {Context} from '../context.js'
import type {ContainerInfo} from '../engine/index.js'
import {silentReporter} from '../reporter.js'
import {Labels, Names, type Workspace} from '../workspace.js'
import {quoteArg} from '../util/shell-quote.js'
import {buildRepoImage, currentBuildKey, repoBuildArgs, repoDockerfileDir, workspaceBaseTag} from './build.js'

export type RepoImageState = 'missing' | 'current' | 'stale' | 'unknown'

/**
 * Whether the workspace's image is there and up to date. `unknown` when its
 * inputs cannot be known (build-key.ts: a remote ADD, an image not present),
 * or the base image is missing: then it is left as it is.
 */
export async function repoImageState(ctx: Context, ws: Workspace, baseTag: string): Promise<{image: string; id?: string; state: RepoImageState}> {
  const {image, args, buildArgs} = repoBuildArgs(ws, baseTag)
  const baseName = Names.baseImage(baseTag)
  const [found, base] = await Promise.all([ctx.engine.images.inspect(image), ctx.engine.images.inspect(baseName)])
  if (!found) return {image, state: 'missing'}
  if (!base) return {image, id: found.id, state: 'unknown'}
  const key = await currentBuildKey(ctx.engine, repoDockerfileDir(ws), args, buildArgs, {[baseName]: base.id})
  if (key === undefined) return {image, id: found.id, state: 'unknown'}
  return {image, id: found.id, state: found.labels[Labels.buildKey] === key ? 'current' : 'stale'}
}

/**
 * Rebuild the workspace's image when it is stale (progress on the reporter),
 * and build it when it is missing and `build` is set. An untrusted Dockerfile
 * is refused by the build (ConfigError), before anything is built. Resolves to
 * the image's ID, or undefined when there is none.
 */
export async function refreshRepoImage(ctx: Context, ws: Workspace, options: {baseTag?: string; build?: boolean}): Promise<string | undefined> {
  const baseTag = workspaceBaseTag(ws, options.baseTag)
  const current = await repoImageState(ctx, ws, baseTag)
  if (current.state === 'current' || current.state === 'unknown') return current.id
  if (current.state === 'missing' && !options.build) return undefined
  if (current.state === 'stale') {
    // An untrusted Dockerfile is refused before anything says it is being rebuilt.
    assertBuildTrusted(ws.path, ctx.env)
    const reporter = ctx.reporter ?? silentReporter
    reporter.info(`${current.image} is out of date (.agent-sandbox/Dockerfile, its context or the base image changed since it was built): rebuilding it`)
  }
  await buildRepoImage(ctx, ws, {baseTag})
  return (await ctx.engine.images.inspect(current.image))?.id
}

/** Whether two image IDs are the same image (Podman leaves out the `sha256:` of Docker's form in places). Pure. */
export function sameImageId(a: string, b: string): boolean {
  return a.replace(/^sha256:/, '') === b.replace(/^sha256:/, '')
}

/** The one line that names a running sandbox on an older image, and the commands that recreate it; undefined when it runs on `imageId`. Pure. */
export function olderImageNotice(ws: Workspace, sandbox: Pick<ContainerInfo, 'name' | 'imageId'>, imageId: string | undefined, branch?: string): string | undefined {
  if (imageId === undefined || sameImageId(sandbox.imageId, imageId)) return undefined
  const args = `${quoteArg(ws.path)}${branch === undefined ? '' : ` --branch ${quoteArg(branch)}`}`
  return `${sandbox.name} runs an older image than ${Names.image(ws)}:latest; recreate it to use the new one: agent-sandbox stop ${args} && agent-sandbox start ${args}`
}

/** For a running sandbox: rebuild a stale image, then name the sandbox if it runs on an older one. */
export async function checkRunningImage(ctx: Context, ws: Workspace, sandbox: ContainerInfo, options: {baseTag?: string; branch?: string}): Promise<void> {
  const imageId = await refreshRepoImage(ctx, ws, {baseTag: options.baseTag})
  const notice = olderImageNotice(ws, sandbox, imageId, options.branch)
  if (notice) (ctx.reporter ?? silentReporter).warn(notice)
}
