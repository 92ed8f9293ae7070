/**
 * Grants: what lets a name out. The base allowlist (`default`: the image's
 * default domains; `config`: the workspace's and user's allowDomains) lasts
 * for the sandbox's life; a `firewall allow` adds a live grant, which may
 * expire (`until`), let one request out (`once`) or carry an upload budget
 * (`maxUpload`, request bytes to its host). Re-granting an entry replaces its
 * grant. The gateway keeps the grants in a file of its own tmpfs (one JSON
 * object a line, appended over an exec), checks expiry when a request comes
 * (no timers), and counts what each grant let out in memory. Pure but for
 * the counts the GrantBook keeps.
 */

/** One live grant, as `firewall allow` hands it to the gateway. Times are ms since the epoch. */
export interface Grant {
  /** The allowlist entry (`host` or `*.host`). */
  entry: string
  /** When it was granted. */
  at: number
  /** When it expires; none: for the sandbox's life. */
  until?: number
  /** The --for it was given, for its name in the log (`allow for 10m until …`). */
  forMs?: number
  /** It lets one request (or passed-through connection) out, then none. */
  once?: boolean
  /** Request bytes it lets out to its host, in all. */
  maxUpload?: number
}

/** What a request is counted against: a grant's id (its line in the file) and how much it used. */
export interface GrantUse {
  requests: number
  bytes: number
}

const UNITS: Record<string, number> = {ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000}

/** `3s`, `10m`, `2h`, `1h30m`, `500ms`, `1d`: ms, or undefined when it is not a duration (or is zero). */
export function parseGrantDuration(text: string): number | undefined {
  const t = text.trim().toLowerCase()
  if (!/^(\d+(ms|s|m|h|d))+$/.test(t)) return undefined
  let ms = 0
  for (const [, n, unit] of t.matchAll(/(\d+)(ms|s|m|h|d)/g)) ms += Number(n) * UNITS[unit]
  return ms > 0 && Number.isSafeInteger(ms) ? ms : undefined
}

/** A duration in its shortest exact form: `3s`, `10m`, `1h30m`, `1500ms`. */
export function formatDuration(ms: number): string {
  if (ms % 1000 !== 0) return `${ms}ms`
  let rest = ms / 1000
  const out: string[] = []
  for (const [unit, size] of [['d', 86_400], ['h', 3600], ['m', 60], ['s', 1]] as const) {
    if (rest >= size) {
      out.push(`${Math.floor(rest / size)}${unit}`)
      rest %= size
    }
  }
  return out.join('') || '0s'
}

const SIZES: Record<string, number> = {'': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3}

/** `5m`, `100k`, `1g`, `4096` (bytes; k/m/g are KiB/MiB/GiB, a trailing `b`/`ib` allowed): bytes, or undefined (zero too). */
export function parseGrantSize(text: string): number | undefined {
  const m = /^(\d+)\s*([kmg]?)(i?b)?$/.exec(text.trim().toLowerCase())
  if (!m || (m[3] && !m[2] && m[3] !== 'b')) return undefined
  const bytes = Number(m[1]) * SIZES[m[2]]
  return bytes > 0 && Number.isSafeInteger(bytes) ? bytes : undefined
}

/** A size in its shortest exact form: `5m`, `100k`, `1g`, else bytes. */
export function formatSize(bytes: number): string {
  for (const [unit, size] of [['g', 1024 ** 3], ['m', 1024 ** 2], ['k', 1024]] as const) if (bytes % size === 0) return `${bytes / size}${unit}`
  return String(bytes)
}

/** A grant's name in the log: `allow`, `allow for 10m until <ISO>`, `allow once`, `allow max-upload 5m (used N)`, limits joined by `, `. */
export function describeGrant(g: Grant, use: GrantUse = {requests: 0, bytes: 0}): string {
  const limits: string[] = []
  // A --once grant's own short life goes unnamed: `allow once`.
  if (g.until !== undefined && (g.forMs !== undefined || !g.once)) limits.push(`${g.forMs === undefined ? '' : `for ${formatDuration(g.forMs)} `}until ${new Date(g.until).toISOString()}`)
  if (g.once) limits.push('once')
  if (g.maxUpload !== undefined) limits.push(`max-upload ${formatSize(g.maxUpload)} (used ${use.bytes})`)
  return limits.length ? `allow ${limits.join(', ')}` : 'allow'
}

const isGrant = (g: unknown): g is Grant => {
  const o = g as Record<string, unknown>
  const optNumber = (k: string) => o[k] === undefined || (typeof o[k] === 'number' && Number.isFinite(o[k]))
  return typeof o === 'object' && o !== null && typeof o.entry === 'string' && typeof o.at === 'number' && optNumber('until') && optNumber('forMs') && optNumber('maxUpload') && (o.once === undefined || typeof o.once === 'boolean')
}

/** The grants file: one JSON object a line; a bad line is skipped (its id, the line's index, stays taken). */
export function parseGrantLines(text: string): Array<Grant | undefined> {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((line) => {
      try {
        const g = JSON.parse(line) as unknown
        return isGrant(g) ? {...g, entry: g.entry.toLowerCase()} : undefined
      } catch {
        return undefined
      }
    })
}

/** The entry's base name: `*.x` and `x` are one grant (each covers the name and its subdomains). */
const baseOf = (entry: string) => entry.replace(/^\*\./, '')
const covers = (entry: string, host: string) => {
  const base = baseOf(entry)
  return host === base || host.endsWith(`.${base}`)
}

/** The grant in force for each entry: the last one given (re-granting replaces). */
export function currentGrants(lines: Array<Grant | undefined>): Array<{id: number; grant: Grant}> {
  const byBase = new Map<string, {id: number; grant: Grant}>()
  lines.forEach((grant, id) => {
    if (grant) byBase.set(baseOf(grant.entry), {id, grant})
  })
  return [...byBase.values()]
}

/** Why a grant lets nothing more out now (for a request of `upFront` bytes), or undefined when it does. */
export function grantSpent(g: Grant, use: GrantUse, now: number, upFront = 0): string | undefined {
  if (g.until !== undefined && now >= g.until) return `grant expired: ${describeGrant(g, use)}`
  if (g.once && use.requests > 0) return `grant used: ${describeGrant(g, use)}`
  if (g.maxUpload !== undefined && use.bytes + upFront > g.maxUpload) return `upload budget of the grant spent: ${describeGrant(g, use)}${upFront ? `, the request needs ${upFront}` : ''}`
  return undefined
}

/** How limited a grant is: an expiry least, a budget more, once most; then the later expiry (the most lenient usable grant serves). */
const leniency = (g: Grant) => [Number(g.until !== undefined) + 2 * Number(g.maxUpload !== undefined) + 4 * Number(Boolean(g.once)), -(g.until ?? Infinity)]

export type GrantChoice = {ok: true; source: 'default' | 'config'} | {ok: true; source: 'allow'; id: number; grant: Grant} | {ok: false; rule: string} | {ok: false; rule: undefined}

/**
 * Which grant lets a request to `host` out: the base allowlist first (an expiring grant never blocks
 * what the config allows), then the most lenient live grant that covers it and is not spent for a
 * request of `upFront` bytes. None: the reason of the most specific spent grant, or `rule: undefined`
 * when no grant covers the host at all.
 */
export function chooseGrant(host: string, base: {defaults: string[]; config: string[]}, grants: Array<{id: number; grant: Grant}>, useOf: (id: number) => GrantUse, now: number, upFront = 0): GrantChoice {
  if (base.defaults.some((e) => covers(e, host))) return {ok: true, source: 'default'}
  if (base.config.some((e) => covers(e, host))) return {ok: true, source: 'config'}
  const covering = grants.filter(({grant}) => covers(grant.entry, host))
  const usable = covering.filter(({id, grant}) => grantSpent(grant, useOf(id), now, upFront) === undefined)
  if (usable.length) {
    const [best] = usable.sort((a, b) => {
      const [la, ea] = leniency(a.grant)
      const [lb, eb] = leniency(b.grant)
      return la - lb || ea - eb
    })
    return {ok: true, source: 'allow', id: best.id, grant: best.grant}
  }
  if (!covering.length) return {ok: false, rule: undefined}
  const [specific] = covering.sort((a, b) => baseOf(b.grant.entry).length - baseOf(a.grant.entry).length)
  return {ok: false, rule: grantSpent(specific.grant, useOf(specific.id), now, upFront)}
}

/** A request let out under a grant: its name for the log, and the counter of its upload. */
export interface Admission {
  /** Whether its grant has an upload budget (only then is what streams counted). */
  readonly metered: boolean
  /** The grant's name as the log shows it (with what it used so far). */
  name(): string
  /** Count `n` more request bytes; false (nothing counted) when they would cross the upload budget. */
  charge(n: number): boolean
  /** The reason charge refused, for the log. */
  spentRule(n: number): string
}

/**
 * The grants the gateway holds and what each let out. `live` gives the grants file's lines
 * (re-read when it changes); uses are counted per grant id, so a new grant starts afresh.
 */
export class GrantBook {
  private readonly uses = new Map<number, GrantUse>()
  constructor(
    private readonly base: {defaults: string[]; config: string[]},
    private readonly live: () => Array<Grant | undefined>,
    private readonly now: () => number = Date.now,
  ) {}

  /** The live grants' entries (expired ones too: a request to one is refused by name, saying so). */
  entries(): string[] {
    return currentGrants(this.live()).map(({grant}) => grant.entry)
  }

  private useOf = (id: number): GrantUse => this.uses.get(id) ?? {requests: 0, bytes: 0}

  /**
   * Admit a request (or a passed-through connection) to `host`: `upFront` bytes are counted at once
   * (the head, and the body when its length is known); with `count` false the grant is only checked
   * (a TLS handshake that is intercepted: its requests are admitted one by one).
   */
  admit(host: string, upFront: number, count = true): Admission | {rule: string} {
    const choice = chooseGrant(host, this.base, currentGrants(this.live()), this.useOf, this.now(), upFront)
    if (!choice.ok) return {rule: choice.rule ?? 'not allowlisted'}
    if (choice.source !== 'allow') {
      const name = choice.source
      return {metered: false, name: () => name, charge: () => true, spentRule: () => ''}
    }
    const {id, grant} = choice
    const use = {...this.useOf(id)}
    if (count) {
      use.requests += 1
      use.bytes += upFront
      this.uses.set(id, use)
    }
    return {
      metered: grant.maxUpload !== undefined,
      name: () => describeGrant(grant, this.useOf(id)),
      charge: (n: number) => {
        const now = this.useOf(id)
        if (grant.maxUpload !== undefined && now.bytes + n > grant.maxUpload) return false
        this.uses.set(id, {...now, bytes: now.bytes + n})
        return true
      },
      spentRule: (n: number) => `upload budget of the grant spent: ${describeGrant(grant, this.useOf(id))}, ${n} more bytes refused`,
    }
  }
}
