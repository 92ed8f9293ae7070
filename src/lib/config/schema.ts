/**
 * The settings a workspace or user config file may hold: one valibot schema,
 * the types inferred from it, and the checks the rest of the library calls
 * (checkConfigFile, checkLimits, isDomain), which name the failing field in a
 * library-neutral ConfigIssue. Valibot, not zod: building zod's schema cost
 * 2.6 ms of every command that reads settings, this one 0.7 ms
 * (docs/PERFORMANCE.md, `config`).
 */
import * as v from 'valibot'
import {MIN_CPUS, MIN_MEMORY_BYTES, parseSize} from './limits.js'
import {parseAllowEntry} from '../util/allow-entry.js'
import {DEFAULT_HTTP_RULES} from '../network/gateway/rules.js'

const text = (re: RegExp, message: string) => v.pipe(v.string(), v.regex(re, message))
// Actions typed for their one input type: a shared untyped one would widen what a pipe infers.
const nonEmpty = <T extends string | unknown[]>() => v.minLength<T, 1, string>(1, 'must not be empty')
const whole = v.integer<number, string>('must be a whole number')
const atLeast = (n: number, message = `must be at least ${n}`) => v.minValue<number, number, string>(n, message)
const atMost = (n: number) => v.maxValue<number, number, string>(n, `must be at most ${n}`)

/** Valibot's object and record schemas take an array as an object with index keys; JSON's objects only, as zod did. */
const notList = <S extends v.GenericSchema>(schema: S) => v.pipe(v.custom<unknown>((x) => !Array.isArray(x), 'must be an object, not a list'), schema)
const object = <E extends v.ObjectEntries>(entries: E) => notList(v.strictObject(entries))

const envName = text(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a valid environment variable name')
/** valibot's record leaves these keys out of what it returns: refused instead, so that nothing is dropped without a word. */
const DROPPED_KEYS = ['__proto__', 'constructor', 'prototype']
const envRecord = v.pipe(
  v.custom<unknown>((x) => !(x && typeof x === 'object' && DROPPED_KEYS.some((k) => Object.hasOwn(x, k))), 'must not name __proto__, constructor or prototype'),
  notList(v.record(envName, v.string())),
)
const domain = text(
  /^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/,
  'must be a host name such as example.com or *.example.com',
)
/** An allowDomains entry: a host name, or `name:PORT`, `name:PORT/udp` (allow-entry.ts). */
const entryProblem = (s: string): string => {
  const parsed = parseAllowEntry(s)
  return parsed.ok ? '' : `must be an allowlist entry: ${parsed.reason}`
}
const allowEntry = v.pipe(
  v.string(),
  v.check((s: string) => entryProblem(s) === '', (issue) => entryProblem(String(issue.input))),
)
const relPath = v.pipe(
  v.string(),
  nonEmpty<string>(),
  v.check((p) => !p.startsWith('/') && !p.split('/').includes('..'), 'must be a path inside the workspace, without ".."'),
)
const port = text(/^((\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):\d{1,5}:\d{1,5}|(\d{1,5}:)?\d{1,5})(\/(tcp|udp))?$/, 'must look like 3000, 8080:3000 or 127.0.0.1:8080:3000')
/** A branch name or a glob of them (`release/*`), as the push gate matches them. */
const branchGlob = v.pipe(
  v.string(),
  v.regex(/^[^\s~^:\\]+$/, 'must be a branch name or a glob such as release/*'),
  v.check((b) => !b.startsWith('-') && !b.startsWith('refs/'), 'must be a branch name such as main (without refs/heads/)'),
)
const SIZE = /^\d+(\.\d+)?[bkmgBKMG]?$/
const size = text(SIZE, 'must be a size such as 512m or 4g')
const homePath = (message: string) => v.pipe(v.string(), nonEmpty<string>(), v.check((p) => p.startsWith('/') || p.startsWith('~/'), message))

/** A user's own tree, pre-approved (`~/src/mine/*`): `*` matches within one path component, `**` across them. */
const trustedPath = homePath('must be an absolute path or start with ~/')

/** One httpRules entry (src/lib/network/gateway/rules.ts): a host, and the methods and path globs it admits. */
const HttpRuleSchema = object({
  host: domain,
  methods: v.optional(
    v.pipe(
      v.array(text(/^[A-Za-z]+$/, 'must be an HTTP method such as GET')),
      nonEmpty<string[]>(),
      v.transform((ms) => ms.map((m) => m.toUpperCase())),
    ),
  ),
  paths: v.optional(v.pipe(v.array(text(/^\/[^\s]*$/, 'must be a path glob starting with /, such as /myorg/*')), nonEmpty<string[]>())),
})

const NetworkModeSchema = v.picklist(['firewall', 'none', 'open'])
export type NetworkMode = v.InferOutput<typeof NetworkModeSchema>

/** Image registries whose domains a preset allowlists (spec-sandbox.ts REGISTRY_DOMAINS); off by default. */
const RegistryPresetSchema = v.picklist(['docker.io', 'ghcr.io', 'quay.io'])
export type RegistryPreset = v.InferOutput<typeof RegistryPresetSchema>

export {MIN_CPUS, MIN_MEMORY_BYTES, parseSize} from './limits.js'

const LimitsSchema = object({
  memory: v.optional(
    v.pipe(
      size,
      v.check((s) => !SIZE.test(s) || parseSize(s) >= MIN_MEMORY_BYTES, "must be at least 6m (the engine's minimum; a limit of 0 would mean none)"),
    ),
  ),
  cpus: v.optional(v.pipe(v.number(), atLeast(MIN_CPUS, "must be at least 0.01 (the engine's minimum; a limit of 0 would mean none)"), atMost(1024))),
  pids: v.optional(v.pipe(v.number(), whole, atLeast(16), atMost(4_194_304))),
})

const parsesAsUrl = (u: string) => {
  // new URL(), not valibot's url(): on node 20 URL.canParse answers wrongly for some
  // Latin-1 strings once V8 has optimised its caller (a process checking many files).
  try {
    return Boolean(new URL(u))
  } catch {
    return false
  }
}
const httpUrl = v.pipe(
  v.string(),
  v.check(parsesAsUrl, 'must be a URL such as https://api.github.com'),
  v.check((u) => /^https?:\/\//i.test(u), 'must start with https:// (or http:// for a local stand-in)'),
)
const positiveWhole = v.pipe(v.number(), whole, atLeast(1))

/** A GitHub App whose short-lived installation tokens the sandbox's git and gh use (docs/github-app.md). */
const GithubSchema = object({
  appId: v.optional(v.union([positiveWhole, text(/^[A-Za-z0-9.]+$/, 'must be the App ID (a number) or its client ID')])),
  installationId: v.optional(positiveWhole),
  privateKeyPath: v.optional(homePath('must be an absolute path (or start with ~/)')),
  apiUrl: v.optional(httpUrl),
  /** Base URL for clones; default derived from apiUrl (api.github.com → github.com, GHES …/api/v3 → its host). */
  gitUrl: v.optional(httpUrl),
  /** Renew the token this long before it expires. */
  refreshMarginSeconds: v.optional(v.pipe(v.number(), whole, atLeast(1), atMost(3000))),
})

/** A secretEnv entry that masks its value: a surrogate inside, the value only at these hosts. */
const MaskedSecretSchema = v.pipe(
  v.custom<unknown>((x) => Boolean(x) && typeof x === 'object', 'must be a variable name, or {"name": "VAR", "hosts": ["api.example.com"]}'),
  object({name: envName, hosts: v.pipe(v.array(domain), nonEmpty<string[]>())}),
)

const ConfigFileSchema = object({
  $schema: v.optional(v.string()),
  baseTag: v.optional(text(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/, 'must be a valid image tag')),
  protectedPaths: v.optional(v.array(relPath)),
  /** Detect the repository's hook frameworks and mount their configuration read-only (src/lib/git/hook-config.ts). */
  protectHookConfig: v.optional(v.boolean()),
  env: v.optional(envRecord),
  /** A name passes the host's value in as is; `{name, hosts}` masks it: a surrogate inside, the value only at those hosts (the egress gateway). */
  secretEnv: v.optional(v.array(v.lazy((entry) => (typeof entry === 'string' ? envName : MaskedSecretSchema)))),
  ports: v.optional(v.array(port)),
  allowDomains: v.optional(v.array(allowEntry)),
  /** Per-host method and path rules the egress gateway applies (trusted config only; per host, a higher layer replaces a lower one's). */
  httpRules: v.optional(v.array(HttpRuleSchema)),
  network: v.optional(NetworkModeSchema),
  dockerNetwork: v.optional(v.pipe(v.string(), nonEmpty<string>())),
  limits: v.optional(LimitsSchema),
  sharedAgentConfig: v.optional(v.boolean()),
  /** Rootless Podman inside the sandbox, behind its firewall (docker, DOCKER_HOST, compose; docs/security.md). */
  nestedContainers: v.optional(v.boolean()),
  /** Registries whose domains are allowlisted (image pulls, nested or not). */
  registries: v.optional(v.array(RegistryPresetSchema)),
  /** Relabel bind mounts for SELinux (`:z`): auto = when the engine's host enforces SELinux labels. */
  selinuxRelabel: v.optional(v.picklist(['auto', 'on', 'off'])),
  /** Branches the push gate never updates (globs), besides the host repository's default branch. */
  protectedBranches: v.optional(v.array(branchGlob)),
  github: v.optional(GithubSchema),
  /** The egress gateway: inspectAll intercepts every HTTPS connection, not only hosts with httpRules or a masked secret. */
  gateway: v.optional(object({inspectAll: v.optional(v.boolean())})),
  /** `watch`: an OS notification (notify-send, else the terminal bell) for each new pending approval. Read from the user's own config file only. */
  watchNotify: v.optional(v.boolean()),
  /** Only read from the user's own config file (load.ts refuses it elsewhere). */
  trustedPaths: v.optional(v.array(trustedPath)),
})

/** What is wrong with a value: the dotted path of the field ('' for the value itself) and what it must be. */
export interface ConfigIssue {
  field: string
  message: string
}

export type Checked<T> = {success: true; data: T} | {success: false; issue: ConfigIssue}

const isUnknownKey = (issue: v.BaseIssue<unknown>) => issue.kind === 'schema' && issue.expected === 'never' && issue.path?.at(-1)?.origin === 'key'

/** What an issue without a message of ours (a wrong type, a missing or unknown field) says. */
function defaultMessage(issue: v.BaseIssue<unknown>): string {
  if (isUnknownKey(issue)) return `unknown field ${JSON.stringify(issue.path?.at(-1)?.key)}`
  if (issue.received === 'undefined') return 'is required'
  const kinds: Record<string, string> = {string: 'a string', number: 'a number', boolean: 'true or false', Array: 'a list', Object: 'an object'}
  const options = (issue.expected ?? '').replace(/^\((.*)\)$/, '$1').split(' | ')
  const expected = options.every((o) => o.startsWith('"')) ? `one of ${options.join(', ')}` : options.map((o) => kinds[o] ?? o).join(' or ')
  return `must be ${expected}, not ${kinds[issue.received] ?? issue.received}`
}

function check<S extends v.GenericSchema>(schema: S, value: unknown): Checked<v.InferOutput<S>> {
  const result = v.safeParse(schema, value, {message: defaultMessage})
  if (result.success) return {success: true, data: result.output}
  const issue = result.issues[0]
  // An unknown field is the object's fault: named at the object, as zod did.
  const path = (issue.path ?? []).slice(0, isUnknownKey(issue) ? -1 : undefined)
  return {success: false, issue: {field: path.map((item) => String(item.key)).join('.'), message: issue.message}}
}

/** A config file's contents (or the AGENT_SANDBOX_* layer, or a file about to be written), checked. */
export const checkConfigFile = (value: unknown): Checked<ConfigFile> => check(ConfigFileSchema, value)

/** Resource limits from flags, checked as a config file's `limits` would be. */
export const checkLimits = (value: unknown): Checked<ResourceLimits> => check(LimitsSchema, value)

/** A host name as allowDomains takes it (`example.com`, `*.example.com`). */
export const isDomain = (value: string): boolean => v.is(domain, value)

export type ResourceLimits = v.InferOutput<typeof LimitsSchema>

export type ConfigFile = v.InferOutput<typeof ConfigFileSchema>

/**
 * Working-tree paths mounted read-only over themselves. The host's .git is not
 * among them: the agent gets a git directory of its own over it (agent-git.sh),
 * and only the push gate writes the host's (docs/security.md).
 */
export const DEFAULT_PROTECTED_PATHS = ['.husky', '.agent-sandbox', '.agent-precommit/user-context.json']

/**
 * The settings after every layer is merged (load.ts): each key of the file
 * format with its default filled in, so the type follows the schema. `$schema`
 * `trustedPaths` and `watchNotify` are the files' own business, not a sandbox's.
 */
export type Settings = Required<Omit<ConfigFile, '$schema' | 'trustedPaths' | 'watchNotify' | 'limits' | 'github' | 'gateway'>> & {
  limits: ResourceLimits
  github: GithubSettings
  gateway: {inspectAll: boolean}
}

/** The GitHub App settings, with the API URL and the refresh margin defaulted. */
export type GithubSettings = Omit<v.InferOutput<typeof GithubSchema>, 'apiUrl' | 'refreshMarginSeconds'> & {
  apiUrl: string
  refreshMarginSeconds: number
}

export const DEFAULTS: Settings = {
  baseTag: 'latest',
  protectedPaths: [],
  protectHookConfig: true,
  env: {},
  secretEnv: [],
  ports: [],
  allowDomains: [],
  httpRules: DEFAULT_HTTP_RULES,
  network: 'firewall',
  dockerNetwork: 'bridge',
  limits: {},
  sharedAgentConfig: true,
  nestedContainers: false,
  registries: [],
  selinuxRelabel: 'auto',
  protectedBranches: [],
  github: {apiUrl: 'https://api.github.com', refreshMarginSeconds: 300},
  gateway: {inspectAll: false},
}
