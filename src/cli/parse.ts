/**
 * The one command-line parser: every invocation of every command goes through
 * it, with the command's own definitions (src/cli/params.ts). Pure; a bad
 * command line is a UsageError naming the problem, with the command's help as
 * the hint. oclif's conventions: `--flag value` and `--flag=value`, one-letter
 * aliases for booleans (`-y`), a repeatable flag takes one value per occurrence,
 * and `--` ends the flags (for `exec` and `run`, what follows is the command).
 */
import {UsageError} from '../lib/errors.js'
import type {ArgSet, Flag, FlagSet} from './params.js'

export interface CommandShape {
  id: string
  flags: FlagSet
  args: ArgSet
  /** false: positionals beyond the declared arguments are kept in `argv` (firewall allow's domains). */
  strict: boolean
  /** Takes a command after `--` (exec, run). */
  takesCommand: boolean
  /**
   * Passes arguments through (claude, codex): the command's own flags come
   * first; from the first word that is not one of them (or after `--`),
   * everything is `command`, flags included.
   */
  passThrough?: boolean
}

export interface ParsedCommandLine {
  args: Record<string, string | undefined>
  flags: Record<string, string | string[] | number | boolean | undefined>
  /** Every positional, in order (the declared arguments included). */
  argv: string[]
  /** What follows the first `--`, for commands that take a command; undefined without `--`. */
  command: string[] | undefined
}

/** `agent-sandbox firewall allow` for the id `firewall:allow`. */
export function displayName(id: string): string {
  return `agent-sandbox ${id.split(':').join(' ')}`
}

export function parseCommandLine(shape: CommandShape, argv: readonly string[]): ParsedCommandLine {
  const usage = (message: string) => new UsageError(message, {hint: `see ${displayName(shape.id)} --help`})
  if (shape.passThrough) argv = withSeparator(shape.flags, argv)
  const split = argv.indexOf('--')
  const own = split === -1 ? argv : argv.slice(0, split)
  const after = split === -1 ? [] : argv.slice(split + 1)
  const flags: ParsedCommandLine['flags'] = {}
  const positionals: string[] = []
  const seen = new Set<string>()
  const byChar = new Map(Object.entries(shape.flags).flatMap(([name, flag]) => (flag.type === 'boolean' && flag.char ? [[flag.char, name] as const] : [])))

  for (let i = 0; i < own.length; i++) {
    const token = own[i]
    if (token === '-' || !token.startsWith('-')) {
      positionals.push(token)
      continue
    }
    let name: string
    let inline: string | undefined
    if (token.startsWith('--')) {
      const eq = token.indexOf('=')
      name = token.slice(2, eq === -1 ? undefined : eq)
      inline = eq === -1 ? undefined : token.slice(eq + 1)
    } else {
      const alias = byChar.get(token.slice(1))
      if (alias === undefined) throw usage(`Nonexistent flag: ${token}`)
      name = alias
    }
    const flag: Flag | undefined = Object.hasOwn(shape.flags, name) ? shape.flags[name] : undefined
    if (!flag) throw usage(`Nonexistent flag: --${name}`)
    if (seen.has(name) && !(flag.kind === 'string' && flag.multiple)) throw usage(`--${name} can only be given once`)
    seen.add(name)
    if (flag.kind === 'boolean') {
      if (inline !== undefined) throw usage(`--${name} takes no value`)
      flags[name] = true
      continue
    }
    const value = inline ?? own[++i]
    // A value that looks like a flag is one only when attached: `--branch=-x`.
    if (value === undefined || (inline === undefined && value.startsWith('-') && value !== '-')) {
      throw usage(`--${name} expects a value${value === undefined ? '' : ` (for one that starts with -, write --${name}=${value})`}`)
    }
    if (flag.kind === 'integer') {
      const number = Number(value)
      if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(number)) throw usage(`--${name} expects an integer, not ${JSON.stringify(value)}`)
      if (flag.min !== undefined && number < flag.min) throw usage(`--${name} must be at least ${flag.min}, not ${number}`)
      flags[name] = number
      continue
    }
    if (flag.options && !flag.options.includes(value)) throw usage(`Expected --${name}=${value} to be one of: ${flag.options.join(', ')}`)
    flags[name] = flag.multiple ? [...((flags[name] as string[] | undefined) ?? []), value] : value
  }

  // Without a command to take, `--` only ends the flags: what follows are arguments.
  if (!shape.takesCommand && !shape.passThrough) positionals.push(...after)
  const names = Object.keys(shape.args)
  // Words where a command should be, without `--`: the command says what is missing.
  const commandWithoutDashes = shape.takesCommand && split === -1
  if (shape.strict && positionals.length > names.length && !commandWithoutDashes) throw usage(`Unexpected argument: ${positionals[names.length]}`)
  const args: ParsedCommandLine['args'] = {}
  names.forEach((name, index) => {
    args[name] = positionals[index]
    if (args[name] === undefined && shape.args[name].required) throw usage(`Missing required argument: ${name}`)
  })
  for (const [name, flag] of Object.entries(shape.flags)) {
    if (flags[name] === undefined && flag.kind === 'string' && flag.default !== undefined) flags[name] = flag.default
    if (flags[name] === undefined && flag.kind === 'boolean') flags[name] = false
  }
  if (shape.passThrough) return {args, flags, argv: positionals, command: after}
  return {args, flags, argv: positionals, command: shape.takesCommand && split !== -1 ? after : undefined}
}

/**
 * A pass-through command's line with `--` where its own flags end: before the
 * first word that is not one of its flags (or a flag's value), which begins
 * what is passed through. Pure.
 */
function withSeparator(flags: FlagSet, argv: readonly string[]): readonly string[] {
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]
    if (token === '--') return argv
    const name = token.startsWith('--') ? token.slice(2).split('=')[0] : undefined
    const flag = name !== undefined && Object.hasOwn(flags, name) ? flags[name] : undefined
    if (!flag) return [...argv.slice(0, i), '--', ...argv.slice(i)]
    if (flag.kind !== 'boolean' && !token.includes('=')) i++
  }
  return argv
}
