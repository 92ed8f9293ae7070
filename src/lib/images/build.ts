/**
 * build-base and build: version resolution, CA certificates, and streamed
 * builds through the engine CLI.
 */
import {cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {baseImageDir, packageRoot} from '../util/assets.js'
import {GATEWAY_DEFAULTS} from '../network/gateway/ports.js'
import {loadSettings} from '../config/load.js'
import {assertBuildTrusted} from '../config/trust.js'
import {buildKey, externalImages, readBuildContext} from './build-key.js'
import {caCertsDigest, certificateProblem, readChosenCaCerts, type CaChoice} from './ca.js'
import type {Engine} from '../engine/index.js'
import {BuildError, CommandFailedError, ImageMissingError, UsageError} from '../errors.js'
import {run} from '../util/proc.js'
import {silentReporter, type Reporter} from '../reporter.js'
export {caCertPathsFromEnv, readCaCerts, splitPem} from './ca.js'
import {IMAGE_RUNTIME, isInitialised, Labels, Names, requireInitialised, type Workspace} from '../workspace.js'
import type {Context} from '../context.js'

export const TOOLS = {
  claudeCode: {pkg: '@anthropic-ai/claude-code', arg: 'CLAUDE_CODE_VERSION'},
  codex: {pkg: '@openai/codex', arg: 'CODEX_VERSION'},
  astGrep: {pkg: '@ast-grep/cli', arg: 'AST_GREP_VERSION'},
} as const
export type Tool = keyof typeof TOOLS
export type ToolVersions = Record<Tool, string>

/** Answers "which concrete version does this npm spec mean?". */
export interface RegistryClient {
  resolve(pkg: string, spec: string): Promise<string>
}

/** Asks the user's own npm (their registry, proxy and CA settings apply). */
export const npmRegistry: RegistryClient = {
  async resolve(pkg, spec) {
    let result
    try {
      result = await run('npm', ['view', `${pkg}@${spec}`, 'version', '--json'], {timeoutMs: 60_000})
    } catch (error) {
      const detail = error instanceof CommandFailedError ? error.message : String(error)
      throw new BuildError(`cannot resolve ${pkg}@${spec} from the npm registry: ${detail}`, {
        cause: error,
        hint: 'check your network or npm registry settings, or pass a concrete version (e.g. --codex-version 0.1.0)',
      })
    }
    const parsed = JSON.parse(result.stdout || 'null') as string | string[] | null
    const version = Array.isArray(parsed) ? parsed.at(-1) : parsed
    if (!version) throw new BuildError(`no version of ${pkg} matches ${spec}`, {hint: 'pass an existing version'})
    return version
  },
}

const CONCRETE = /^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$/

export function isConcreteVersion(version: string): boolean {
  return CONCRETE.test(version)
}

/** Resolve every non-concrete version (e.g. `latest`, `^2`) at once, so that build args are stable and layers cache. */
export async function resolveVersions(requested: ToolVersions, registry: RegistryClient): Promise<ToolVersions> {
  const entries = await Promise.all(
    (Object.keys(TOOLS) as Tool[]).map(async (tool) => {
      const spec = requested[tool].trim()
      if (!/^[0-9A-Za-z.^~<>=*|+ -]+$/.test(spec)) throw new UsageError(`invalid version for ${TOOLS[tool].pkg}: ${JSON.stringify(spec)}`)
      return [tool, isConcreteVersion(spec) ? spec : await registry.resolve(TOOLS[tool].pkg, spec)] as const
    }),
  )
  return Object.fromEntries(entries) as ToolVersions
}

/** `ARG NAME=value` defaults of a Dockerfile. */
export function parseArgDefaults(dockerfile: string): Record<string, string> {
  const out: Record<string, string> = {}
  for (const line of dockerfile.split('\n')) {
    const match = /^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$/.exec(line)
    if (match) out[match[1]] = match[2]
  }
  return out
}

export function defaultToolVersions(): ToolVersions & {gitDelta: string} {
  const defaults = parseArgDefaults(readFileSync(join(baseImageDir, 'Dockerfile'), 'utf8'))
  return {
    claudeCode: defaults.CLAUDE_CODE_VERSION ?? 'latest',
    codex: defaults.CODEX_VERSION ?? 'latest',
    astGrep: defaults.AST_GREP_VERSION ?? 'latest',
    gitDelta: defaults.GIT_DELTA_VERSION ?? 'debian',
  }
}

export interface BuildBaseOptions {
  tag: string
  versions: ToolVersions
  gitDeltaVersion: string
  /** The CA certificates to trust inside the image (ca.ts chooseCaCerts); none when it names no file. */
  ca: CaChoice
  baseImage?: string
  registry?: RegistryClient
}

export interface BuildBaseResult {
  image: string
  versions: ToolVersions & {gitDelta: string}
  caCertificates: number
}

/** The gateway's program, bundled by `npm run build`. */
const GATEWAY_BUNDLE = join(packageRoot, 'dist', 'bundle', 'egress-gateway.cjs')

export async function buildBase(ctx: Context, options: BuildBaseOptions): Promise<BuildBaseResult> {
  const {engine} = ctx
  const reporter = ctx.reporter ?? silentReporter
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/.test(options.tag)) {
    throw new UsageError(`invalid image tag: ${JSON.stringify(options.tag)}`, {hint: 'use letters, digits, ".", "_" and "-", e.g. --tag 2026-11-22'})
  }
  if (!/^(debian|\d+\.\d+\.\d+)$/.test(options.gitDeltaVersion)) {
    throw new UsageError(`invalid git-delta version: ${JSON.stringify(options.gitDeltaVersion)}`, {hint: 'use "debian" (Debian\'s package) or a release such as 0.18.2'})
  }
  // The engine first: with none, say so (exit 3) in one line, before anything else is said or asked of npm.
  await engine.ping()
  const certs = trustedCerts(options.ca, reporter)
  const versions = await reporter.step('Resolving tool versions', () => resolveVersions(options.versions, options.registry ?? npmRegistry))
  reporter.info(`claude-code ${versions.claudeCode}, codex ${versions.codex}, ast-grep ${versions.astGrep}, git-delta ${options.gitDeltaVersion}`)
  const context = mkdtempSync(join(tmpdir(), 'agent-sandbox-base-'))
  try {
    for (const entry of readdirSync(baseImageDir)) {
      if (entry !== 'ca-certificates') cpSync(join(baseImageDir, entry), join(context, entry), {recursive: true})
    }
    // The gateway's program is built from src/ (scripts/bundle-cli.mjs), not kept in base-image/.
    if (!existsSync(GATEWAY_BUNDLE)) throw new BuildError(`${GATEWAY_BUNDLE} is missing`, {hint: 'build the CLI first: npm run build'})
    cpSync(GATEWAY_BUNDLE, join(context, 'egress-gateway.cjs'))
    const certDir = join(context, 'ca-certificates')
    cpSync(join(baseImageDir, 'ca-certificates'), certDir, {recursive: true})
    certs.forEach((pem, i) => writeFileSync(join(certDir, `agent-sandbox-${String(i).padStart(3, '0')}.crt`), pem))
    const image = Names.baseImage(options.tag)
    const args = ['build', '--tag', image]
    if (options.baseImage) args.push('--build-arg', `BASE_IMAGE=${options.baseImage}`)
    for (const tool of Object.keys(TOOLS) as Tool[]) args.push('--build-arg', `${TOOLS[tool].arg}=${versions[tool]}`)
    args.push('--build-arg', `GIT_DELTA_VERSION=${options.gitDeltaVersion}`)
    // The gateway's node boots from a snapshot made with its own flags (base-image/node-boot.sh).
    args.push('--build-arg', `GATEWAY_NODE_FLAGS=${GATEWAY_DEFAULTS.nodeFlags.join(' ')}`)
    args.push('--label', `${Labels.managed}=true`, '--label', `${Labels.kind}=base`)
    args.push('--label', `${Labels.versions}=${JSON.stringify({...versions, gitDelta: options.gitDeltaVersion})}`)
    args.push('--label', `${Labels.runtime}=${IMAGE_RUNTIME}`)
    if (certs.length) args.push('--label', `${Labels.caCerts}=${caCertsDigest(certs)}`)
    args.push(context)
    await streamBuild(engine, args, image, reporter, {command: 'agent-sandbox build-base', tag: options.tag})
    return {image, versions: {...versions, gitDelta: options.gitDeltaVersion}, caCertificates: certs.length}
  } finally {
    rmSync(context, {recursive: true, force: true})
  }
}

/** The certificates of a choice, saying in one line where they come from (a host file that cannot be used: a warning, then without it). */
function trustedCerts(ca: CaChoice, reporter: Reporter): string[] {
  if (!ca.paths.length) return []
  const {certs, skipped} = readChosenCaCerts(ca)
  for (const path of skipped) reporter.warn(`${ca.source} names ${path}, which holds no readable PEM certificate: building without it`)
  if (certs.length) {
    const files = ca.paths.filter((p) => !skipped.includes(p)).join(', ')
    reporter.info(`trusting the CA certificates in ${files} (${ca.source})${ca.fromHost ? '; --ca-cert overrides' : ''}`)
  }
  return certs
}

/** How a failed build's last line names the fix for an untrusted certificate. */
interface CaRemedy {
  command: string
  tag: string
}

/**
 * The error for a failed build: the engine's own reason, or, when a download
 * failed on an untrusted certificate (a TLS-inspecting proxy whose CA the
 * image lacks), that problem and the flag that fixes it. Pure.
 */
export function buildFailure(image: string, output: string, remedy: CaRemedy): BuildError {
  const problem = certificateProblem(output)
  if (problem) {
    return new BuildError(`building ${image} failed: a download did not trust a TLS certificate (${problem}), as behind a TLS-inspecting proxy`, {
      hint: `give the proxy's CA certificate to the image: ${remedy.command} --tag ${remedy.tag} --ca-cert /path/to/proxy-ca.pem`,
    })
  }
  const lines = output.split('\n').map((l) => l.trim())
  const reason =
    lines.filter((l) => /error|failed|returned a non-zero code|not found|denied/i.test(l) && !/^DEPRECATED/.test(l)).pop() ?? lines.filter(Boolean).pop() ?? 'unknown error'
  return new BuildError(`building ${image} failed: ${reason}`, {hint: 'the build output above has the details'})
}

/** Run a build with its output streamed to the reporter; a failure carries the engine's own message. */
async function streamBuild(engine: Engine, args: string[], image: string, reporter: Reporter, remedy: CaRemedy): Promise<void> {
  // --force-rm: the classic builder otherwise leaves the failed step's container behind.
  const [verb, ...rest] = args
  const result = await engine.cli.run([verb, '--force-rm', ...rest], {onOutput: (chunk) => reporter.output(chunk), allowFailure: true, env: {DOCKER_CLI_HINTS: 'false'}})
  if (result.exitCode !== 0) throw buildFailure(image, `${result.stdout}\n${result.stderr}`, remedy)
}

export interface BuildRepoOptions {
  baseTag: string
  /** Build every step again, even when nothing has changed. */
  noCache?: boolean
  /** The CA certificates the host names (ca.ts chooseCaCerts): the build says whether the base image trusts them. */
  ca?: CaChoice
}

/**
 * The base tag a workspace's image is built on (flag > env > config > default),
 * after checking the workspace is set up: both before any engine call, so a
 * bad workspace is reported as such even when the engine is down.
 */
export function workspaceBaseTag(ws: Workspace, flag?: string): string {
  requireInitialised(ws)
  // The base tag never widens anything: an untrusted file's other settings are for start to refuse.
  return loadSettings({workspacePath: ws.path, flags: flag ? {baseTag: flag} : undefined, untrusted: 'report'}).settings.baseTag
}

export function repoDockerfileDir(ws: Workspace): string {
  return join(ws.path, '.agent-sandbox')
}

/** The per-repo image's name and the build's arguments and labels, as far as they go into its key. Pure. */
export function repoBuildArgs(ws: Workspace, baseTag: string): {image: string; args: string[]; buildArgs: Record<string, string>} {
  const image = `${Names.image(ws)}:latest`
  const buildArgs = {BASE_IMAGE_TAG: baseTag}
  const args = [
    'build',
    '--tag',
    image,
    ...Object.entries(buildArgs).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]),
    '--label',
    `${Labels.managed}=true`,
    '--label',
    `${Labels.kind}=repo`,
    '--label',
    `${Labels.workspace}=${ws.path}`,
  ]
  return {image, args, buildArgs}
}

/** The build's key (build-key.ts), or undefined when its inputs cannot be known. */
export async function currentBuildKey(
  engine: Engine,
  dir: string,
  args: string[],
  buildArgs: Record<string, string>,
  known: Record<string, string>,
): Promise<string | undefined> {
  let refs: string[] | undefined
  let context
  try {
    refs = externalImages(readFileSync(join(dir, 'Dockerfile'), 'utf8'), buildArgs)
    context = readBuildContext(dir)
  } catch {
    return undefined // unreadable: the build itself reports it
  }
  if (!refs) return undefined
  const imageIds: Record<string, string> = {}
  for (const ref of refs) {
    const id = known[ref] ?? (await engine.images.inspect(ref))?.id
    if (!id) return undefined
    imageIds[ref] = id
  }
  return buildKey({args, context, imageIds})
}

/**
 * A workspace image's steps run on the base image's trust store: say in one
 * line whether it trusts the certificates the host names, and if not, what
 * rebuilds it so that it does.
 */
async function reportBaseCa(engine: Engine, baseTag: string, ca: CaChoice, reporter: Reporter): Promise<void> {
  if (!ca.paths.length) return
  const {certs, skipped} = readChosenCaCerts(ca)
  if (!certs.length) return
  const base = Names.baseImage(baseTag)
  const files = ca.paths.filter((p) => !skipped.includes(p)).join(', ')
  const label = (await engine.images.inspect(base))?.labels[Labels.caCerts]
  if (label === caCertsDigest(certs)) reporter.info(`${base} trusts the CA certificates in ${files} (${ca.source})`)
  else reporter.warn(`${base} was not built to trust the CA certificates in ${files} (${ca.source}); if a step fails on a certificate: agent-sandbox build-base --tag ${baseTag}`)
}

/** The base image's ID; ImageMissingError (with the command that builds it) when it is not there. */
export async function ensureBaseImage(engine: Engine, baseTag: string): Promise<string> {
  const base = Names.baseImage(baseTag)
  const found = await engine.images.inspect(base)
  if (!found) {
    throw new ImageMissingError(`base image ${base} is missing`, {hint: `build it with: agent-sandbox build-base --tag ${baseTag}`})
  }
  return found.id
}

export async function buildRepoImage(ctx: Context, ws: Workspace, options: BuildRepoOptions): Promise<string> {
  const {engine} = ctx
  const reporter = ctx.reporter ?? silentReporter
  const dir = repoDockerfileDir(ws)
  if (!isInitialised(ws)) {
    throw new ImageMissingError(`no .agent-sandbox/Dockerfile in ${ws.path}`, {hint: `run: agent-sandbox init ${JSON.stringify(ws.path)}`})
  }
  // Its RUN steps run with an open network: only the template, or what the user approved.
  assertBuildTrusted(ws.path, ctx.env)
  const baseId = await ensureBaseImage(engine, options.baseTag)
  const {image, args, buildArgs} = repoBuildArgs(ws, options.baseTag)
  const key = await currentBuildKey(engine, dir, args, buildArgs, {[Names.baseImage(options.baseTag)]: baseId})
  if (options.noCache) args.push('--no-cache')
  else if (key && (await engine.images.inspect(image))?.labels[Labels.buildKey] === key) {
    reporter.info(`${image} is up to date: nothing it is built from has changed (--no-cache rebuilds it)`)
    return image
  }
  if (key) args.push('--label', `${Labels.buildKey}=${key}`)
  if (options.ca) await reportBaseCa(engine, options.baseTag, options.ca, reporter)
  // The Dockerfile is found in the context by its default name: some docker
  // CLI versions parse --file as CSV, which breaks on paths with quotes.
  args.push(dir)
  await streamBuild(engine, args, image, reporter, {command: 'agent-sandbox build-base', tag: options.baseTag})
  return image
}
