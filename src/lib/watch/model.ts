/**
 * `watch`'s event model: what the gatherer (gather.ts) reports about the
 * sandboxes on the engine, the state those events build, which entries a key
 * acts on, and the one-line JSON form of each event (`watch --json`). Pure:
 * the terminal UI (src/cli/watch-screen.ts) and the JSON stream read the same
 * events.
 */
import type {PendingApproval} from '../network/pending.js'
import type {RequestLogEntry} from '../network/gateway/log.js'

/** A sandbox as `watch` shows it. */
export interface WatchedSandbox {
  name: string
  repo: string
  /** The workspace's path on the host. */
  path: string
  mode: string
  branch: string
  /** `running`, or the engine's status of a sandbox that is not. */
  state: string
  running: boolean
  network: string
  /** ISO time it started (running only). */
  startedAt?: string
  cpuPercent?: number
  memoryBytes?: number
}

/** A kept push (refs/sandbox/<branch>) that waits for review. */
export interface WatchedPush {
  branch: string
  commit: string
}

export type WatchEvent =
  | {type: 'sandboxes'; sandboxes: WatchedSandbox[]}
  | {type: 'request'; sandbox: string; entry: RequestLogEntry}
  | {type: 'pending'; sandbox: string; pending: PendingApproval[]}
  | {type: 'pushes'; workspace: string; pushes: WatchedPush[]}
  /** What a key did, or why it failed. */
  | {type: 'action'; ok: boolean; message: string}
  /** A sandbox whose data could not be read this time; the rest goes on. */
  | {type: 'warning'; sandbox?: string; message: string}

/** The requests kept on screen, per watch. */
export const MAX_REQUESTS = 500

export interface WatchState {
  /** Whether the engine has answered once (the first `sandboxes` event). */
  listed: boolean
  sandboxes: WatchedSandbox[]
  /** Newest last. */
  requests: Array<{sandbox: string; entry: RequestLogEntry}>
  /** Sandbox name → its pending approvals. */
  pending: Record<string, PendingApproval[]>
  /** Workspace path → its kept pushes. */
  pushes: Record<string, WatchedPush[]>
  /** Index into selectable(state). */
  selected: number
  /** The last action's outcome or warning. */
  message?: {ok: boolean; text: string}
}

export const initialState = (): WatchState => ({listed: false, sandboxes: [], requests: [], pending: {}, pushes: {}, selected: 0})

/** Something a key acts on: a pending approval of a sandbox, or a kept push of a workspace. */
export type Selectable =
  | {kind: 'pending'; sandbox: WatchedSandbox; approval: PendingApproval}
  | {kind: 'push'; sandbox: WatchedSandbox; push: WatchedPush}

/** The entries a key acts on, in screen order: every pending approval, then every kept push. Pure. */
export function selectable(state: WatchState): Selectable[] {
  const out: Selectable[] = []
  for (const sandbox of state.sandboxes) for (const approval of state.pending[sandbox.name] ?? []) out.push({kind: 'pending', sandbox, approval})
  const seen = new Set<string>()
  for (const sandbox of state.sandboxes) {
    if (seen.has(sandbox.path)) continue
    seen.add(sandbox.path)
    for (const push of state.pushes[sandbox.path] ?? []) out.push({kind: 'push', sandbox, push})
  }
  return out
}

/** What identifies a selectable entry across events. Pure. */
export const itemKey = (item: Selectable): string =>
  item.kind === 'pending' ? `pending ${pendingKey(item.sandbox.name, item.approval)}` : `push ${item.sandbox.path} ${item.push.branch}`

/**
 * The selection follows its entry when entries come or go before it (a key
 * acts on what was selected, never on what slid under the cursor). When the
 * selected entry itself goes, nothing is selected (-1) until the user moves:
 * a key then never lands on an entry that took its place. A move keeps the
 * selection within bounds.
 */
const clampSelection = (state: WatchState, before?: WatchState): WatchState => {
  const items = selectable(state)
  const was = before ? selectable(before)[before.selected] : undefined
  if (was) return {...state, selected: items.findIndex((item) => itemKey(item) === itemKey(was))}
  if (before && before.selected < 0) return state
  return {...state, selected: Math.max(0, Math.min(state.selected, items.length - 1))}
}

/** The state after one event. Pure. */
export function reduce(state: WatchState, event: WatchEvent): WatchState {
  switch (event.type) {
    case 'sandboxes': {
      const names = new Set(event.sandboxes.map((s) => s.name))
      const pending = Object.fromEntries(Object.entries(state.pending).filter(([name]) => names.has(name)))
      return clampSelection({...state, listed: true, sandboxes: event.sandboxes, pending}, state)
    }
    case 'request': {
      const requests = [...state.requests, {sandbox: event.sandbox, entry: event.entry}]
      return {...state, requests: requests.length > MAX_REQUESTS ? requests.slice(-MAX_REQUESTS) : requests}
    }
    case 'pending':
      return clampSelection({...state, pending: {...state.pending, [event.sandbox]: event.pending}}, state)
    case 'pushes':
      return clampSelection({...state, pushes: {...state.pushes, [event.workspace]: event.pushes}}, state)
    case 'action':
      return {...state, message: {ok: event.ok, text: event.message}}
    case 'warning':
      return {...state, message: {ok: false, text: event.sandbox ? `${event.sandbox}: ${event.message}` : event.message}}
  }
}

/** Move the selection by `by` entries, within bounds. Pure. */
export function moveSelection(state: WatchState, by: number): WatchState {
  return clampSelection({...state, selected: state.selected + by})
}

/** How long an allowed host stays allowed. */
export type AllowScope = 'once' | 'ten-minutes' | 'life' | 'save'

export type KeyAction =
  | {kind: 'allow'; scope: AllowScope}
  | {kind: 'deny'}
  | {kind: 'review'}
  | {kind: 'move'; by: number}
  | {kind: 'quit'}
  | {kind: 'redraw'}

/**
 * The keys, as the terminal library names them (`UP`, `CTRL_C`, `a`): one
 * letter each, no mouse, so that it works over SSH and in any terminal.
 */
export const KEYS: Readonly<Record<string, KeyAction>> = {
  o: {kind: 'allow', scope: 'once'},
  t: {kind: 'allow', scope: 'ten-minutes'},
  a: {kind: 'allow', scope: 'life'},
  s: {kind: 'allow', scope: 'save'},
  d: {kind: 'deny'},
  r: {kind: 'review'},
  ENTER: {kind: 'review'},
  UP: {kind: 'move', by: -1},
  k: {kind: 'move', by: -1},
  DOWN: {kind: 'move', by: 1},
  j: {kind: 'move', by: 1},
  q: {kind: 'quit'},
  CTRL_C: {kind: 'quit'},
  ESCAPE: {kind: 'quit'},
  CTRL_L: {kind: 'redraw'},
}

/** The help line's text, from KEYS. */
export const KEY_HELP = 'o allow once · t allow 10 min · a allow for the sandbox\'s life · s save to config · d deny · r review push · ↑/↓ select · q quit'

export function actionForKey(key: string): KeyAction | undefined {
  return Object.hasOwn(KEYS, key) ? KEYS[key] : undefined
}

/** Whether an action applies to the selected entry: allow and deny to a pending approval, review to a push. Pure. */
export function appliesTo(action: KeyAction, item: Selectable | undefined): boolean {
  if (action.kind === 'allow' || action.kind === 'deny') return item?.kind === 'pending'
  if (action.kind === 'review') return item?.kind === 'push'
  return true
}

export const TEN_MINUTES_MS = 10 * 60_000

/** allowDomains's options for a scope: the sandbox's life is no option at all. Pure. */
export function allowOptions(scope: AllowScope): {forMs?: number; once?: boolean; save?: boolean} {
  switch (scope) {
    case 'once':
      return {once: true}
    case 'ten-minutes':
      return {forMs: TEN_MINUTES_MS}
    case 'save':
      return {save: true}
    case 'life':
      return {}
  }
}

/** The key that identifies a pending approval within its sandbox. */
export const pendingKey = (sandbox: string, p: Pick<PendingApproval, 'kind' | 'host' | 'method' | 'path'>): string =>
  `${sandbox} ${p.kind} ${p.host.toLowerCase()}${p.kind === 'rule' ? ` ${p.method ?? ''} ${p.path ?? ''}` : ''}`

/** The approvals in `next` that `seen` has not had yet (each is notified once per watch). Pure. */
export function newApprovals(seen: ReadonlySet<string>, sandbox: string, next: readonly PendingApproval[]): PendingApproval[] {
  return next.filter((p) => !seen.has(pendingKey(sandbox, p)))
}

/** An event as one line of `watch --json`: the event itself, with the time it was seen. Pure. */
export function jsonLine(event: WatchEvent, now: Date = new Date()): string {
  return JSON.stringify({time: now.toISOString(), ...event})
}
