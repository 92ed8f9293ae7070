/**
 * How a command declares its flags and arguments: once, in src/commands/<name>.ts.
 *
 * The objects have the shape oclif reads (`type: 'option' | 'boolean'`, options,
 * multiple, default, …), so `oclif manifest` and oclif's help describe the same
 * definitions our parser (src/cli/parse.ts) runs on. Nothing here loads oclif:
 * building these objects is free at start-up, where oclif's own Flags cost more
 * than a warm `exec` (docs/PERFORMANCE.md).
 */

interface Described {
  description: string
  hidden?: boolean
  helpGroup?: string
}

export interface BooleanFlag extends Described {
  type: 'boolean'
  kind: 'boolean'
  allowNo: false
  char?: string
}

export interface StringFlag<Multiple extends boolean = boolean, Default extends string | undefined = string | undefined> extends Described {
  type: 'option'
  kind: 'string'
  /** Repeatable, one value per occurrence (`--env A --env B`; oclif's multiple + multipleNonGreedy). */
  multiple: Multiple
  options?: readonly string[]
  default?: Default
}

export interface IntegerFlag extends Described {
  type: 'option'
  kind: 'integer'
  multiple: false
  /** The smallest value accepted. */
  min?: number
}

export type Flag = BooleanFlag | StringFlag | IntegerFlag
export type FlagSet = Record<string, Flag>

export interface Arg<Required extends boolean = boolean> {
  description: string
  required: Required
}
export type ArgSet = Record<string, Arg>

type FlagValue<F> = F extends BooleanFlag
  ? boolean
  : F extends IntegerFlag
    ? number | undefined
    : F extends StringFlag<true, string | undefined>
      ? string[] | undefined
      : F extends StringFlag<false, string>
        ? string
        : string | undefined

export type FlagValues<F extends FlagSet> = {[K in keyof F]: FlagValue<F[K]>}
export type ArgValues<A extends ArgSet> = {[K in keyof A]: A[K] extends Arg<true> ? string : string | undefined}

type StringOptions = Described & {options?: readonly string[]}

function stringFlag(options: StringOptions & {multiple: true}): StringFlag<true, undefined>
function stringFlag(options: StringOptions & {default: string}): StringFlag<false, string>
function stringFlag(options: StringOptions): StringFlag<false, undefined>
function stringFlag(options: StringOptions & {multiple?: boolean; default?: string}): StringFlag {
  return {...options, type: 'option', kind: 'string', multiple: options.multiple ?? false}
}

export const Flags = {
  boolean: (options: Described & {char?: string}): BooleanFlag => ({...options, type: 'boolean', kind: 'boolean', allowNo: false}),
  string: stringFlag,
  integer: (options: Described & {min?: number}): IntegerFlag => ({...options, type: 'option', kind: 'integer', multiple: false}),
}

export const Args = {
  required: (description: string): Arg<true> => ({description, required: true}),
  optional: (description: string): Arg<false> => ({description, required: false}),
}
