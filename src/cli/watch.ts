/**
 * `watch`: the gatherer's events (src/lib/watch) either on a terminal UI,
 * where keys act on the selected pending approval or kept push, or as JSON
 * lines on stdout (`--json`, or no terminal).
 */
import {inertText} from '../lib/util/inert-text.js'
import type {Context} from '../lib/context.js'
import {throwIfAborted} from '../lib/errors.js'
import {showKeptPush} from '../lib/git/review.js'
import {allowPending, denyApproval} from '../lib/watch/actions.js'
import {startGatherer, workspaceOf, type Gatherer} from '../lib/watch/gather.js'
import {actionForKey, appliesTo, initialState, jsonLine, moveSelection, newApprovals, pendingKey, reduce, selectable, type KeyAction, type WatchEvent, type WatchState} from '../lib/watch/model.js'
import {writeStdout} from './output.js'
import {buildFrame, colorEnabled} from './watch-frame.js'
import {openScreen, type Screen} from './watch-screen.js'
import {notifyPending} from './watch-notify.js'

export interface WatchOptions {
  /** Ends the watch (Ctrl-C, SIGTERM, SIGHUP). */
  signal: AbortSignal
  notify: boolean
  intervalMs?: number
  env?: NodeJS.ProcessEnv
}

/** Calls `notice` once for each pending approval this watch has not seen before. */
function pendingNotices(notice: (text: string) => void): (event: WatchEvent) => void {
  const seen = new Set<string>()
  return (event) => {
    if (event.type !== 'pending') return
    for (const p of newApprovals(seen, event.sandbox, event.pending)) notice(`${event.sandbox}: ${p.kind === 'rule' ? `${p.method ?? ''} ${p.host}${p.path ?? ''}` : p.host}`)
    for (const p of event.pending) seen.add(pendingKey(event.sandbox, p))
  }
}

/** `watch --json`: every event, one JSON object a line, until the signal aborts. */
export async function watchJson(ctx: Context, options: WatchOptions): Promise<void> {
  const bell = () => (process.stderr.isTTY ? process.stderr.write('\x07') : undefined)
  const notices = options.notify ? pendingNotices((text) => notifyPending(text, bell, options.env)) : () => {}
  // A reader that went away (`watch --json | head`) ends the watch with stdout's error.
  const stop = new AbortController()
  let closed: unknown
  const gatherer = startGatherer(ctx, {
    signal: AbortSignal.any([options.signal, stop.signal]),
    intervalMs: options.intervalMs,
    onEvent: (event) => {
      try {
        writeStdout(`${inertText(jsonLine(event))}\n`)
      } catch (error) {
        closed ??= error
        stop.abort()
      }
      notices(event)
    },
  })
  await gatherer.done
  if (closed) throw closed
  throwIfAborted(options.signal) // a signal ends it as it ends `firewall log --follow`: 128+n
}

/** The terminal UI, until `q`, Ctrl-C or the signal. */
export async function watchScreen(ctx: Context, options: WatchOptions): Promise<void> {
  const env = options.env ?? process.env
  const stop = new AbortController()
  const signal = AbortSignal.any([options.signal, stop.signal])
  let state: WatchState = initialState()
  let screen: Screen | undefined
  let gatherer: Gatherer | undefined
  let busy = false
  let scheduled: NodeJS.Timeout | undefined
  const draw = () => {
    scheduled = undefined
    if (screen) screen.draw(buildFrame(state, screen.height, Date.now()))
  }
  // Events come in bursts (a log's first lines): one frame per burst.
  const redraw = () => (scheduled ??= setTimeout(draw, 15))
  const dispatch = (event: WatchEvent) => {
    const first = !state.listed
    state = reduce(state, event)
    if (first && state.listed) {
      // The first listing at once, not with the next burst; the keys once it is out.
      draw()
      setImmediate(listen)
    } else redraw()
  }

  const act = async (action: KeyAction) => {
    if (action.kind === 'quit') return stop.abort()
    if (action.kind === 'redraw') return draw()
    if (action.kind === 'move') return ((state = moveSelection(state, action.by)), draw())
    const item = selectable(state)[state.selected]
    if (!item || !appliesTo(action, item)) {
      return dispatch({type: 'action', ok: false, message: action.kind === 'review' ? 'select a push to review first' : 'select a pending approval first'})
    }
    if (busy) return
    busy = true
    try {
      if (item.kind === 'push' && screen) {
        const {ws} = workspaceOf(item.sandbox)
        const code = await screen.suspend(() => showKeptPush({signal, foreground: ctx.foreground}, ws, item.push.branch))
        dispatch({type: 'action', ok: code === 0, message: `review show ${item.push.branch} (${item.sandbox.path}): exit ${code}`})
      } else if (item.kind === 'pending') {
        dispatch({type: 'action', ok: true, message: `${item.sandbox.name}: ${action.kind === 'deny' ? 'denying' : 'allowing'} ${item.approval.host}…`})
        const text = action.kind === 'allow' ? await allowPending(ctx, item.sandbox, item.approval, action.scope) : await denyApproval(ctx, item.sandbox, item.approval)
        dispatch({type: 'action', ok: true, message: text})
        gatherer?.refresh(item.sandbox.name)
      }
    } catch (error) {
      dispatch({type: 'action', ok: false, message: error instanceof Error ? error.message : String(error)})
    } finally {
      busy = false
    }
  }

  screen = openScreen({
    color: colorEnabled(env),
    onKey: (name) => {
      const action = actionForKey(name)
      if (action) void act(action)
    },
    onResize: draw,
  })
  const listen = () => void screen?.listen().catch((error: unknown) => dispatch({type: 'warning', message: `cannot read keys: ${error instanceof Error ? error.message : String(error)}`}))
  try {
    draw()
    const notices = options.notify ? pendingNotices((text) => notifyPending(text, () => screen?.bell(), env)) : () => {}
    gatherer = startGatherer(ctx, {
      signal,
      intervalMs: options.intervalMs,
      onEvent: (event) => {
        dispatch(event)
        notices(event)
      },
    })
    const clock = setInterval(draw, 1000) // the clock and the uptimes
    const keysAnyway = setTimeout(listen, 500) // an engine slow to answer does not keep the keys waiting
    try {
      await gatherer.done
    } finally {
      clearInterval(clock)
      clearTimeout(keysAnyway)
      if (scheduled) clearTimeout(scheduled)
    }
  } finally {
    screen.close()
  }
  throwIfAborted(options.signal) // q and Ctrl-C (a key, in raw mode) end it with 0; SIGTERM and SIGHUP with 128+n
}
