/** The settings a workspace or user config file may hold, validated with zod. */
import {z} from 'zod'
import {MIN_CPUS, MIN_MEMORY_BYTES, parseSize} from './limits.js'
import {DEFAULT_HTTP_RULES} from '../network/gateway/rules.js'

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a valid environment variable name')
const domain = z
  .string()
  .regex(/^(\*\.)?([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/, 'must be a host name such as example.com or *.example.com')
const relPath = z
  .string()
  .min(1)
  .refine((p) => !p.startsWith('/') && !p.split('/').includes('..'), 'must be a path inside the workspace, without ".."')
const port = z
  .string()
  .regex(/^((\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):\d{1,5}:\d{1,5}|(\d{1,5}:)?\d{1,5})(\/(tcp|udp))?$/, 'must look like 3000, 8080:3000 or 127.0.0.1:8080:3000')
/** A branch name or a glob of them (`release/*`), as the push gate matches them. */
const branchGlob = z
  .string()
  .regex(/^[^\s~^:\\]+$/, 'must be a branch name or a glob such as release/*')
  .refine((b) => !b.startsWith('-') && !b.startsWith('refs/'), 'must be a branch name such as main (without refs/heads/)')
const SIZE = /^\d+(\.\d+)?[bkmgBKMG]?$/
const size = z.string().regex(SIZE, 'must be a size such as 512m or 4g')

/** A user's own tree, pre-approved (`~/src/mine/*`): `*` matches within one path component, `**` across them. */
const trustedPath = z
  .string()
  .min(1)
  .refine((p) => p.startsWith('/') || p.startsWith('~/'), 'must be an absolute path or start with ~/')

/** One httpRules entry (src/lib/network/gateway/rules.ts): a host, and the methods and path globs it admits. */
const HttpRuleSchema = z
  .object({
    host: domain,
    methods: z
      .array(z.string().regex(/^[A-Za-z]+$/, 'must be an HTTP method such as GET'))
      .min(1)
      .transform((ms) => ms.map((m) => m.toUpperCase()))
      .optional(),
    paths: z.array(z.string().regex(/^\/[^\s]*$/, 'must be a path glob starting with /, such as /myorg/*')).min(1).optional(),
  })
  .strict()

export const NetworkMode = z.enum(['firewall', 'none', 'open'])
export type NetworkMode = z.infer<typeof NetworkMode>

/** Image registries whose domains a preset allowlists (spec.ts REGISTRY_DOMAINS); off by default. */
export const RegistryPreset = z.enum(['docker.io', 'ghcr.io', 'quay.io'])
export type RegistryPreset = z.infer<typeof RegistryPreset>

export {MIN_CPUS, MIN_MEMORY_BYTES, parseSize} from './limits.js'

export const LimitsSchema = z
  .object({
    memory: size.refine((s) => !SIZE.test(s) || parseSize(s) >= MIN_MEMORY_BYTES, 'must be at least 6m (the engine\'s minimum; a limit of 0 would mean none)').optional(),
    cpus: z.number().min(MIN_CPUS, 'must be at least 0.01 (the engine\'s minimum; a limit of 0 would mean none)').max(1024).optional(),
    pids: z.number().int().min(16).max(4_194_304).optional(),
  })
  .strict()

const httpUrl = z
  .string()
  .url('must be a URL such as https://api.github.com')
  .refine((u) => /^https?:\/\//i.test(u), 'must start with https:// (or http:// for a local stand-in)')

/** A GitHub App whose short-lived installation tokens the sandbox's git and gh use (docs/github-app.md). */
export const GithubSchema = z
  .object({
    appId: z.union([z.number().int().positive(), z.string().regex(/^[A-Za-z0-9.]+$/, 'must be the App ID (a number) or its client ID')]).optional(),
    installationId: z.number().int().positive().optional(),
    privateKeyPath: z
      .string()
      .min(1)
      .refine((p) => p.startsWith('/') || p.startsWith('~/'), 'must be an absolute path (or start with ~/)')
      .optional(),
    apiUrl: httpUrl.optional(),
    /** Base URL for clones; default derived from apiUrl (api.github.com → github.com, GHES …/api/v3 → its host). */
    gitUrl: httpUrl.optional(),
    /** Renew the token this long before it expires. */
    refreshMarginSeconds: z.number().int().min(1).max(3000).optional(),
  })
  .strict()

export const ConfigFileSchema = z
  .object({
    $schema: z.string().optional(),
    baseTag: z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/, 'must be a valid image tag').optional(),
    protectedPaths: z.array(relPath).optional(),
    /** Detect the repository's hook frameworks and mount their configuration read-only (src/lib/git/hook-config.ts). */
    protectHookConfig: z.boolean().optional(),
    env: z.record(envName, z.string()).optional(),
    /** A name passes the host's value in as is; `{name, hosts}` masks it: a surrogate inside, the value only at those hosts (the egress gateway). */
    secretEnv: z.array(z.union([envName, z.object({name: envName, hosts: z.array(domain).min(1)}).strict()])).optional(),
    ports: z.array(port).optional(),
    allowDomains: z.array(domain).optional(),
    /** Per-host method and path rules the egress gateway applies (trusted config only; per host, a higher layer replaces a lower one's). */
    httpRules: z.array(HttpRuleSchema).optional(),
    network: NetworkMode.optional(),
    dockerNetwork: z.string().min(1).optional(),
    limits: LimitsSchema.optional(),
    sharedAgentConfig: z.boolean().optional(),
    /** Rootless Podman inside the sandbox, behind its firewall (docker, DOCKER_HOST, compose; docs/security.md). */
    nestedContainers: z.boolean().optional(),
    /** Registries whose domains are allowlisted (image pulls, nested or not). */
    registries: z.array(RegistryPreset).optional(),
    /** Relabel bind mounts for SELinux (`:z`): auto = when the engine's host enforces SELinux labels. */
    selinuxRelabel: z.enum(['auto', 'on', 'off']).optional(),
    /** Branches the push gate never updates (globs), besides the host repository's default branch. */
    protectedBranches: z.array(branchGlob).optional(),
    github: GithubSchema.optional(),
    /** Only read from the user's own config file (load.ts refuses it elsewhere). */
    trustedPaths: z.array(trustedPath).optional(),
  })
  .strict()

export type ConfigFile = z.infer<typeof ConfigFileSchema>

/**
 * Working-tree paths mounted read-only over themselves. The host's .git is not
 * among them: the agent gets a git directory of its own over it (agent-git.sh),
 * and only the push gate writes the host's (docs/security.md).
 */
export const DEFAULT_PROTECTED_PATHS = ['.husky', '.agent-sandbox', '.agent-precommit/user-context.json']

/**
 * The settings after every layer is merged (load.ts): each key of the file
 * format with its default filled in, so the type follows the schema. `$schema`
 * and `trustedPaths` are the files' own business, not a sandbox's.
 */
export type Settings = Required<Omit<ConfigFile, '$schema' | 'trustedPaths' | 'limits' | 'github'>> & {
  limits: z.infer<typeof LimitsSchema>
  github: GithubSettings
}

/** The GitHub App settings, with the API URL and the refresh margin defaulted. */
export type GithubSettings = Omit<z.infer<typeof GithubSchema>, 'apiUrl' | 'refreshMarginSeconds'> & {
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
}

export {domain as DomainSchema, size as SizeSchema, envName as EnvNameSchema}
