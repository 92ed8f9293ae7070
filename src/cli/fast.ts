/**
 * The CLI's fast path for the commands run dozens of times a day and in
 * orchestrators' loops: `exec`, `shell`, `list`, `build`, `checkout` and `run`.
 * Loading oclif costs more than the engine call these commands wrap
 * (docs/PERFORMANCE.md), so bin/run.cjs offers them here first, from one
 * CommonJS bundle of this module (scripts/bundle-fast.mjs).
 *
 * The parser accepts only well-formed command lines made of the commands' own
 * flags. Anything else (help, unknown or repeated flags, values oclif would
 * reject, a missing command after `--`) is left to oclif, so usage errors and
 * help text come from one place. test/unit/fast.test.ts holds these tables to
 * the oclif command definitions. The work itself is the same library calls the
 * oclif commands make, and failures are reported by the same function.
 */
import type {NetworkMode} from '../lib/config/schema.js'
import {connectEngine} from '../lib/engine/index.js'
import {flushStdio} from '../lib/util/stdio.js'
import {resolveWorkspace} from '../lib/workspace.js'
import {makeReporter, reportFailure} from './output.js'

export interface FastFlag {
  kind: 'string' | 'boolean' | 'integer'
  options?: readonly string[]
  /** integer: the smallest value oclif accepts. */
  min?: number
  /** May be given more than once, one value each (oclif's multiple + multipleNonGreedy); values are collected in order. */
  multiple?: boolean
}

interface FastCommand {
  flags: Record<string, FastFlag>
  /** Positional arguments in order; the first `required` of them must be given. */
  args: readonly string[]
  required: number
  /** Takes a command after `--`. */
  command: boolean
}

const text: FastFlag = {kind: 'string'}
const engine: FastFlag = {kind: 'string', options: ['docker', 'podman']}
const network: FastFlag = {kind: 'string', options: ['firewall', 'none', 'open']}

const flag: FastFlag = {kind: 'boolean'}
const path = ['path'] as const

export const FAST_COMMANDS: Record<'build' | 'checkout' | 'exec' | 'list' | 'run' | 'shell', FastCommand> = {
  build: {flags: {'base-tag': text, engine, json: flag, 'no-cache': flag}, args: path, required: 0, command: false},
  checkout: {flags: {'base-tag': text, engine, json: flag}, args: ['branch', 'path'], required: 1, command: false},
  exec: {flags: {'allow-host-network': flag, branch: text, engine, network}, args: path, required: 0, command: true},
  list: {flags: {engine, json: flag}, args: [], required: 0, command: false},
  run: {
    flags: {'allow-host-network': flag, branch: text, cpus: text, engine, env: {kind: 'string', multiple: true}, keep: flag, memory: text, network, 'pids-limit': {kind: 'integer', min: 16}, timeout: text},
    args: path,
    required: 0,
    command: true,
  },
  shell: {flags: {'allow-host-network': flag, 'base-tag': text, branch: text, build: flag, engine, network}, args: path, required: 0, command: false},
}

export type FastCommandName = keyof typeof FAST_COMMANDS

export interface FastInvocation {
  name: FastCommandName
  args: Record<string, string>
  flags: Record<string, string | true | number | string[]>
  /** The command after `--` (exec). */
  command: string[]
}

/** Parse a command line the fast path can run, or undefined to leave it to oclif. Pure. */
export function parseFast(argv: readonly string[]): FastInvocation | undefined {
  const [name, ...rest] = argv
  if (!Object.hasOwn(FAST_COMMANDS, name)) return undefined
  const def = FAST_COMMANDS[name as FastCommandName]
  const split = rest.indexOf('--')
  if (def.command && (split === -1 || split === rest.length - 1)) return undefined
  if (!def.command && split !== -1) return undefined
  const own = split === -1 ? rest : rest.slice(0, split)
  const invocation: FastInvocation = {name: name as FastCommandName, args: {}, flags: {}, command: split === -1 ? [] : rest.slice(split + 1)}
  let positional = 0
  for (let i = 0; i < own.length; i++) {
    const token = own[i]
    if (!token.startsWith('-')) {
      if (positional === def.args.length || token === '') return undefined
      invocation.args[def.args[positional++]] = token
      continue
    }
    if (!token.startsWith('--')) return undefined
    const eq = token.indexOf('=')
    const flagName = token.slice(2, eq === -1 ? undefined : eq)
    const flag = Object.hasOwn(def.flags, flagName) ? def.flags[flagName] : undefined
    if (!flag || (!flag.multiple && Object.hasOwn(invocation.flags, flagName))) return undefined
    if (flag.kind === 'boolean') {
      if (eq !== -1) return undefined
      invocation.flags[flagName] = true
      continue
    }
    const value = eq === -1 ? own[++i] : token.slice(eq + 1)
    if (value === undefined || value === '' || value.startsWith('-')) return undefined
    if (flag.options && !flag.options.includes(value)) return undefined
    if (flag.kind === 'integer') {
      // oclif's integer flags: digits only, at least `min`; anything else gets oclif's error.
      if (!/^\d+$/.test(value) || Number(value) < (flag.min ?? 0) || !Number.isSafeInteger(Number(value))) return undefined
      invocation.flags[flagName] = Number(value)
    } else if (flag.multiple) {
      invocation.flags[flagName] = [...((invocation.flags[flagName] as string[] | undefined) ?? []), value]
    } else {
      invocation.flags[flagName] = value
    }
  }
  return positional < def.required ? undefined : invocation
}

/** Run a fast-path command; resolves to its exit code once its output is flushed, or undefined when oclif should handle the command line. */
export async function runFast(argv: readonly string[]): Promise<number | undefined> {
  const invocation = parseFast(argv)
  if (!invocation) return undefined
  // Values never to print (a run's secret env values), in output and in errors alike.
  const secrets: string[] = []
  let code: number
  try {
    code = await run(invocation, secrets)
  } catch (error) {
    code = reportFailure(error instanceof Error ? error : new Error(String(error)), secrets)
  }
  // The caller exits at once: what we wrote must reach a piped reader first.
  await flushStdio()
  return code
}

async function run({name, args, flags, command}: FastInvocation, secrets: string[]): Promise<number> {
  const str = (key: string) => (typeof flags[key] === 'string' ? (flags[key] as string) : undefined)
  // Each command loads only its own modules: a warm exec must not pay for zod.
  if (name === 'list') {
    const {formatSandboxTable, listSandboxes} = await import('../lib/sandbox/listing.js')
    const rows = await listSandboxes({engine: await connectEngine({engine: str('engine')})})
    process.stdout.write(flags.json ? `${JSON.stringify(rows, null, 2)}\n` : formatSandboxTable(rows).map((line) => `${line}\n`).join(''))
    return 0
  }
  const reporter = makeReporter(() => secrets)
  if (name === 'run') {
    const {runOneShot} = await import('./one-shot.js')
    const oneShot = {
      'allow-host-network': flags['allow-host-network'] === true,
      branch: str('branch'),
      cpus: str('cpus'),
      env: flags.env as string[] | undefined,
      keep: flags.keep === true,
      memory: str('memory'),
      network: str('network'),
      'pids-limit': flags['pids-limit'] as number | undefined,
      timeout: str('timeout'),
    }
    return runOneShot(args.path, command, oneShot, {engine: () => connectEngine({engine: str('engine')}), reporter, secrets})
  }
  const ws = resolveWorkspace(args.path)
  if (name === 'checkout') {
    const {describeCheckout, provisionBranch} = await import('../lib/git/shelf.js')
    const engine = await connectEngine({engine: str('engine')})
    const result = await provisionBranch(engine, ws, args.branch, {baseTag: str('base-tag'), reporter})
    process.stdout.write(flags.json ? `${JSON.stringify(result, null, 2)}\n` : `${describeCheckout(result)}\n`)
    return 0
  }
  if (name === 'build') {
    const {buildRepoImage, workspaceBaseTag} = await import('../lib/images/build.js')
    const baseTag = workspaceBaseTag(ws, str('base-tag'))
    const engine = await connectEngine({engine: str('engine')})
    const image = await buildRepoImage(engine, ws, {baseTag, noCache: flags['no-cache'] === true, reporter})
    process.stdout.write(flags.json ? `${JSON.stringify({image, baseTag}, null, 2)}\n` : `${image}\n`)
    return 0
  }
  const {execInSandbox} = await import('../lib/sandbox/session.js')
  const ctx = {engine: await connectEngine({engine: str('engine')}), reporter}
  const options = {branch: str('branch'), network: str('network') as NetworkMode | undefined, allowHostNetwork: flags['allow-host-network'] === true}
  if (name === 'exec') return execInSandbox(ctx, ws, command, {...options, interactive: false})
  return execInSandbox(ctx, ws, ['bash', '-l'], {...options, baseTag: str('base-tag'), build: flags.build === true, interactive: true})
}
