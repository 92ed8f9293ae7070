/**
 * What a workspace's own .agent-sandbox/config.json would change, compared
 * with the settings below it (the user's file and the defaults), and which of
 * those changes widen what the sandbox may do. Pure: trust.ts decides whether a
 * widening change may apply (docs/security.md, "Settings a repository may
 * change").
 */
import {looksSecret} from '../util/secret-names.js'
import {parseSize} from './limits.js'
import type {ConfigFile, NetworkMode, Settings} from './schema.js'
import {isLoopbackHost} from '../util/addresses.js'
import {describeRule, mergeHttpRules, rulesLoosen} from '../network/gateway/rules.js'

/**
 * Environment variable names a workspace file may not set untrusted. The
 * container's environment reaches root's processes too (the entrypoint,
 * init-firewall.sh's curl), so this is every name that changes how a program
 * loads or runs code, where it reads its configuration, start-up files,
 * certificates, locale or terminal data from, which proxy or resolver it uses,
 * or what the entrypoint does (`AGENT_SANDBOX_NETWORK=open` would skip the
 * firewall). A trailing `*` matches any suffix and a leading `*` any prefix;
 * matching ignores case (`http_proxy` is `HTTP_PROXY`), so entries are
 * written upper-case.
 */
export const RISKY_ENV_NAMES: readonly string[] = [
  // the sandbox's own switches
  'AGENT_SANDBOX_*',
  // shells and their start-up files
  'BASH_ENV',
  'BASH_FUNC_*',
  'BASHOPTS',
  'CDPATH',
  'ENV',
  'HOME',
  'IFS',
  'INPUTRC',
  'PATH',
  'PROMPT_COMMAND',
  'PS4',
  'SHELLOPTS',
  'ZDOTDIR',
  // the dynamic loader and the C library
  'DYLD_*',
  'GCONV_PATH',
  'GLIBC_TUNABLES',
  'HOSTALIASES',
  'LD_*',
  'LOCALDOMAIN',
  'LOCPATH',
  'MALLOC_*',
  'NLSPATH',
  'RES_OPTIONS',
  'TMPDIR',
  'TZDIR',
  // network clients: their config files, proxies and certificates
  '*_PROXY',
  'CURL_*',
  'OPENSSL_*',
  'REQUESTS_CA_BUNDLE',
  'SSL_CERT_DIR',
  'SSL_CERT_FILE',
  'SSLKEYLOGFILE',
  'WGETRC',
  'XDG_*',
  // language runtimes
  'JAVA_TOOL_OPTIONS',
  'NODE_*',
  'NPM_CONFIG_*',
  'PERL*',
  'PYTHON*',
  'RUBY*',
  '_JAVA_OPTIONS',
  // git, gh and ssh
  'GH_*',
  'GIT_*',
  'GNUPGHOME',
  'SSH_ASKPASS',
  // programs other programs start: editors, pagers, terminal data
  'EDITOR',
  'LESSCLOSE',
  'LESSOPEN',
  'MANPAGER',
  'PAGER',
  'TERMINFO*',
  'VISUAL',
]

/** `AGENT_SANDBOX_GITHUB_META=0` only turns GitHub's published ranges off (docs/security.md). */
const HARMLESS_ENV: Readonly<Record<string, string>> = {AGENT_SANDBOX_GITHUB_META: '0'}

export function isRiskyEnv(name: string, value?: string): boolean {
  if (value !== undefined && HARMLESS_ENV[name] === value) return false
  const upper = name.toUpperCase()
  return RISKY_ENV_NAMES.some((pattern) => envNameMatches(pattern, upper))
}

/** `NODE_*` matches by prefix, `*_PROXY` by suffix, anything else exactly. Pure. */
export function envNameMatches(pattern: string, name: string): boolean {
  if (pattern.endsWith('*')) return name.startsWith(pattern.slice(0, -1))
  if (pattern.startsWith('*')) return name.endsWith(pattern.slice(1))
  return name === pattern
}

/** What lies below the workspace file: defaults and the user's file merged. */
export type LowerSettings = Settings

export interface ConfigChange {
  /** The field, as written in the file (`limits.memory`, `env.NODE_OPTIONS`, `ports`). */
  key: string
  /** One line for people: what changes. */
  summary: string
  widens: boolean
}

const NETWORK_RANK: Record<NetworkMode, number> = {none: 0, firewall: 1, open: 2}

/** Host addresses that only the host itself can reach. */
/** The host address a published port binds to: loopback unless the entry names one (as spec.ts's parsePort). */
export function portHostIp(text: string): string {
  const body = text.split('/')[0]
  const ipv6 = /^\[([^\]]+)\]:/.exec(body)
  if (ipv6) return ipv6[1]
  const parts = body.split(':')
  return parts.length === 3 ? parts[0] : '127.0.0.1'
}


/** A limit as spec.ts sends it to the engine (0 or less: none); NaN for what does not parse. */
function engineValue(key: 'memory' | 'cpus' | 'pids', value: string | number): number {
  try {
    if (key === 'memory') return parseSize(String(value))
    return key === 'cpus' ? Math.round(Number(value) * 1e9) : Number(value)
  } catch {
    return Number.NaN
  }
}

const show = (value: unknown) => (value === undefined ? '(unset)' : JSON.stringify(value))

/**
 * Every change the workspace file makes to the lower settings, one entry per
 * key (and per added list item or env name), each marked widening or not.
 * A value equal to what lies below changes nothing and is not listed.
 */
export function workspaceChanges(layer: ConfigFile, lower: LowerSettings): ConfigChange[] {
  const changes: ConfigChange[] = []
  const add = (key: string, summary: string, widens: boolean) => changes.push({key, summary, widens})
  const scalar = <K extends keyof ConfigFile & keyof LowerSettings>(key: K, widens: (value: NonNullable<ConfigFile[K]>) => boolean) => {
    const value = layer[key]
    if (value === undefined || value === lower[key]) return
    add(key, `${show(lower[key])} -> ${show(value)}`, widens(value as NonNullable<ConfigFile[K]>))
  }
  scalar('baseTag', () => false)
  scalar('network', (value) => NETWORK_RANK[value] > NETWORK_RANK[lower.network])
  scalar('dockerNetwork', () => true)
  scalar('sharedAgentConfig', () => true)
  // User namespaces, an unmasked /proc and two devices for the agent (docs/security.md, nested containers).
  scalar('nestedContainers', (value) => value)
  scalar('selinuxRelabel', (value) => value === 'off')
  scalar('protectHookConfig', (value) => value === false)
  const added = (key: 'protectedPaths' | 'ports' | 'allowDomains' | 'registries', widens: (item: string) => boolean) => {
    for (const item of layer[key] ?? []) {
      if (!(lower[key] as readonly string[]).includes(item)) add(key, `+ ${item}`, widens(item))
    }
  }
  // Lists only add up across layers: a workspace can add protected paths, never remove one.
  added('protectedPaths', () => false)
  // Any secret passed in widens, masked or not (its hosts choose where the value goes).
  for (const entry of layer.secretEnv ?? []) {
    if (!lower.secretEnv.some((e) => JSON.stringify(e) === JSON.stringify(entry))) {
      add('secretEnv', `+ ${typeof entry === 'string' ? entry : `${entry.name} (masked, for ${entry.hosts.join(', ')})`}`, true)
    }
  }
  added('ports', (port) => !isLoopbackHost(portHostIp(port)))
  added('allowDomains', () => true)
  // A registry preset allowlists its domains.
  added('registries', () => true)
  // httpRules only restrict: rules for a host nothing below restricts narrow; replacing a restricted host's rules may loosen them.
  if (layer.httpRules?.length) {
    const loosened = new Set(rulesLoosen(lower.httpRules, layer.httpRules))
    const merged = mergeHttpRules(lower.httpRules, layer.httpRules)
    for (const host of new Set(layer.httpRules.map((r) => r.host.toLowerCase()))) {
      const now = merged.filter((r) => r.host.toLowerCase() === host).map(describeRule).join('; ')
      add(`httpRules.${host}`, loosened.has(host) ? `replaces the rules below -> ${now}` : `+ ${now}`, loosened.has(host))
    }
  }
  for (const branch of layer.protectedBranches ?? []) add('protectedBranches', `+ ${branch}`, false)
  for (const [name, value] of Object.entries(layer.env ?? {})) {
    if (lower.env[name] === value) continue
    const shown = (v: string | undefined) => (v === undefined ? '(unset)' : looksSecret(name) ? '***' : JSON.stringify(v))
    add(`env.${name}`, `${shown(lower.env[name])} -> ${shown(value)}`, isRiskyEnv(name, value))
  }
  for (const key of ['memory', 'cpus', 'pids'] as const) {
    const value = layer.limits?.[key]
    const below = lower.limits[key]
    if (value === undefined || value === below) continue
    // Compared as the engine gets them (spec.ts): "0" memory or 1e-10 CPUs become 0, which the engine
    // reads as no limit. No limit below means unlimited: any workspace limit that is one lowers it.
    const engine = (v: string | number) => engineValue(key, v)
    const raises = below !== undefined && !(engine(value) > 0 && engine(value) <= engine(below))
    add(`limits.${key}`, `${below === undefined ? 'unlimited' : show(below)} -> ${show(value)}`, raises)
  }
  // Interception of every host off: a surrogate sent to a host without rules or secrets is no longer seen.
  const inspectAll = layer.gateway?.inspectAll
  if (inspectAll !== undefined && inspectAll !== lower.gateway.inspectAll) add('gateway.inspectAll', `${show(lower.gateway.inspectAll)} -> ${show(inspectAll)}`, !inspectAll)
  for (const [key, value] of Object.entries(layer.github ?? {})) {
    const below = (lower.github as unknown as Record<string, unknown>)[key]
    // installationId picks whose repositories the user's App token opens.
    if (value !== below) add(`github.${key}`, `${show(below)} -> ${show(value)}`, key === 'installationId')
  }
  return changes
}

/** The widening changes only. */
export function wideningChanges(layer: ConfigFile, lower: LowerSettings): ConfigChange[] {
  return workspaceChanges(layer, lower).filter((c) => c.widens)
}
