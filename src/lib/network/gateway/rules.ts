/**
 * httpRules (docs/configuration.md): per-host limits on the methods and paths
 * of requests through the egress gateway. Pure: the gateway applies them
 * (state.ts judge), config merges them per host (load.ts) and trust classifies a
 * workspace file's rules (widening.ts).
 *
 * A host with at least one rule that names methods or paths is restricted:
 * the gateway intercepts its TLS, and a request passes when one of the host's
 * rules admits both its method and its path. A rule with neither restricts
 * nothing (it is how a user lifts a default rule).
 */

export interface HttpRule {
  /** `example.com` (that name only) or `*.example.com` (its subdomains). */
  host: string
  /** Upper-case methods; absent: any. */
  methods?: string[]
  /** Path globs (`*` any run of characters, `/` included; `?` one); absent: any. */
  paths?: string[]
}

/** The npm registry read-only: installs work, `npm publish` (a PUT) does not. */
export const DEFAULT_HTTP_RULES: HttpRule[] = [{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}]

export function ruleHostMatches(pattern: string, host: string): boolean {
  const p = pattern.toLowerCase()
  return p.startsWith('*.') ? host.endsWith(p.slice(1)) : host === p
}

export const restricts = (r: HttpRule) => r.methods !== undefined || r.paths !== undefined

const HOST = /^(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/
const isList = (v: unknown, ok: (s: string) => boolean) => Array.isArray(v) && v.length > 0 && v.every((s) => typeof s === 'string' && ok(s))

/** A rule as the gateway takes it live (`firewall allow --methods/--paths`): a lower-case host, upper-case methods, paths from `/`. */
export function isHttpRule(value: unknown): value is HttpRule {
  if (typeof value !== 'object' || value === null) return false
  const r = value as Record<string, unknown>
  if (Object.keys(r).some((k) => k !== 'host' && k !== 'methods' && k !== 'paths')) return false
  if (typeof r.host !== 'string' || !HOST.test(r.host)) return false
  if (r.methods !== undefined && !isList(r.methods, (m) => /^[A-Z]+$/.test(m))) return false
  if (r.paths !== undefined && !isList(r.paths, (p) => /^\/\S*$/.test(p))) return false
  return r.methods !== undefined || r.paths !== undefined
}

/** The live rules file (one rule as JSON a line); lines that are not rules are skipped. */
export function parseRuleLines(text: string): HttpRule[] {
  const out: HttpRule[] = []
  for (const line of text.split('\n')) {
    try {
      const r = line.trim() ? (JSON.parse(line) as unknown) : undefined
      if (isHttpRule(r)) out.push(r)
    } catch {
      // a torn line
    }
  }
  return out
}

/**
 * What adding `rule` (firewall allow --methods/--paths) does to the rules in
 * force. `allow` only widens: a host its rules already restrict gets the rule
 * besides them (a request passes when one admits it); a host just allowlisted
 * by the same command gets it as its only rule; a host that was already
 * allowed without restriction keeps every method and path (the rule would
 * narrow it). Pure.
 */
export function planRuleAdd(rules: readonly HttpRule[], rule: HttpRule, newlyAllowed: boolean): 'add' | 'present' | 'unrestricted' {
  const host = rule.host.toLowerCase()
  if (rules.some((r) => r.host.toLowerCase() === host && canonical([r]) === canonical([rule]))) return 'present'
  const restricted = rules.some((r) => restricts(r) && (r.host.toLowerCase() === host || ruleHostMatches(r.host, host.replace(/^\*\./, ''))))
  return restricted || newlyAllowed ? 'add' : 'unrestricted'
}

/** The rules that restrict `host` (none: the host is passed through without interception). */
export function rulesFor(host: string, rules: readonly HttpRule[]): HttpRule[] {
  return rules.filter((r) => restricts(r) && ruleHostMatches(r.host, host))
}

const globCache = new Map<string, RegExp>()
/** A path glob of httpRules as a RegExp: `*` matches any run of characters, `/` included (config/trust.ts has the one where it stops at `/`). */
export function globToRegExpAcrossSlashes(glob: string): RegExp {
  let re = globCache.get(glob)
  if (!re) {
    re = new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`)
    globCache.set(glob, re)
  }
  return re
}

/**
 * The path a rule is matched against: dot segments resolved (also `%2e`, as
 * the WHATWG URL parser does) and the query dropped, so `/ok/../secret` is
 * judged as `/secret`. The gateway forwards this same path (with the query),
 * so what was judged is what the server gets.
 */
export function normaliseRequestPath(target: string): {path: string; search: string} | undefined {
  if (!target.startsWith('/')) return undefined
  try {
    const u = new URL(target, 'http://gateway.invalid')
    return {path: u.pathname, search: u.search}
  } catch {
    return undefined
  }
}

export function describeRule(r: HttpRule): string {
  const parts = [r.host]
  if (r.methods) parts.push(`methods ${r.methods.join(',')}`)
  if (r.paths) parts.push(`paths ${r.paths.join(',')}`)
  return `httpRules ${parts.join(' ')}`
}

export type RuleVerdict = {allowed: true; rule?: string} | {allowed: false; rule: string}

/** Whether the host's rules admit a request (its path already normalised). */
export function judgeHttpRules(host: string, method: string, path: string, rules: readonly HttpRule[]): RuleVerdict {
  const mine = rulesFor(host, rules)
  if (!mine.length) return {allowed: true}
  const admitting = mine.find((r) => (!r.methods || r.methods.includes(method.toUpperCase())) && (!r.paths || r.paths.some((g) => globToRegExpAcrossSlashes(g).test(path))))
  if (admitting) return {allowed: true, rule: describeRule(admitting)}
  // Name the rule that refused: the first whose method list admits it failed on the path, else the first.
  const byMethod = mine.find((r) => !r.methods || r.methods.includes(method.toUpperCase()))
  const why = byMethod ? `path ${path} not in` : `method ${method} not in`
  return {allowed: false, rule: `${why} ${describeRule(byMethod ?? mine[0])}`}
}

/** Merge a higher layer's rules over lower ones: a host the layer names gets the layer's rules only. */
export function mergeHttpRules(lower: readonly HttpRule[], layer: readonly HttpRule[]): HttpRule[] {
  const named = new Set(layer.map((r) => r.host.toLowerCase()))
  return [...lower.filter((r) => !named.has(r.host.toLowerCase())), ...layer]
}

/**
 * Whether a workspace layer's rules loosen the lower ones. Rules only
 * restrict, so rules for a host nothing below restricts narrow; rules that
 * replace a restricted host's are taken as loosening unless they are the same
 * (comparing globs for inclusion is not worth the risk of getting it wrong).
 */
export function rulesLoosen(lower: readonly HttpRule[], layer: readonly HttpRule[]): string[] {
  const loosened: string[] = []
  for (const host of new Set(layer.map((r) => r.host.toLowerCase()))) {
    const below = lower.filter((r) => r.host.toLowerCase() === host && restricts(r))
    if (!below.length) continue
    const mine = layer.filter((r) => r.host.toLowerCase() === host)
    if (canonical(mine) !== canonical(lower.filter((r) => r.host.toLowerCase() === host))) loosened.push(host)
  }
  return loosened
}

const canonical = (rules: HttpRule[]) =>
  JSON.stringify(rules.map((r) => [r.host.toLowerCase(), r.methods ? [...r.methods].sort() : null, r.paths ? [...r.paths].sort() : null]).sort())

/**
 * A workspace layer's httpRules with `rule` added for its host. A layer's
 * rules for a host replace the lower ones (mergeHttpRules), so a host the
 * layer does not name yet starts from the lower rules: what was in force
 * stays, and the rule is added to it. Pure.
 */
export function layerWithRule(layer: readonly HttpRule[], lower: readonly HttpRule[], rule: HttpRule): HttpRule[] {
  const host = rule.host.toLowerCase()
  const same = (r: HttpRule) => r.host.toLowerCase() === host
  if (layer.some((r) => same(r) && canonical([r]) === canonical([rule]))) return [...layer]
  return layer.some(same) ? [...layer, rule] : [...layer, ...lower.filter(same), rule]
}
