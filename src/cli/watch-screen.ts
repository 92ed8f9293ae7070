/**
 * `watch`'s terminal. terminal-kit reads the keys (raw mode, and each
 * terminal's escape sequences for arrows and the rest), loaded only by this
 * command (lazyImport) and only after the first frame is on screen: making
 * its Terminal costs 10 to 150 ms (docs/design.md), and keys typed meanwhile
 * wait in the terminal's buffer. The frame (watch-frame.ts) goes out as plain
 * VT100 sequences: the alternate screen, cursor moves and erase-to-end-of-line,
 * which every terminal and multiplexer understands; the size comes from node
 * (SIGWINCH). Suspending hands the whole terminal to a child (the review's
 * pager) and takes it back.
 */
import {lazyImport} from '../lib/util/lazy-import.js'
import {paint, type Line} from './watch-frame.js'

/** The part of terminal-kit's Terminal that watch uses. */
interface Term {
  grabInput(options: false | {mouse?: false}): void
  on(event: 'key', handler: (name: string) => void): void
}

export interface Screen {
  readonly width: number
  readonly height: number
  draw(lines: Line[]): void
  bell(): void
  /** Start reading keys (loads terminal-kit). */
  listen(): Promise<void>
  /** Give the terminal to `fn` (a pager), then take it back. */
  suspend<T>(fn: () => Promise<T>): Promise<T>
  close(): void
}

const ENTER = '\x1b[?1049h\x1b[2J\x1b[?25l' // alternate screen, cleared, cursor hidden
const LEAVE = '\x1b[0m\x1b[?25h\x1b[?1049l'

export function openScreen(options: {color: boolean; onKey: (name: string) => void; onResize: () => void}): Screen {
  const out = process.stdout
  const stdin = process.stdin
  let term: Term | undefined
  let open = true
  const raw = (on: boolean) => {
    if (stdin.isTTY) stdin.setRawMode(on)
  }
  const enter = () => {
    out.write(ENTER)
    raw(true) // from the start: a key typed before terminal-kit reads is neither echoed nor lost
    term?.grabInput({mouse: false})
  }
  const leave = () => {
    term?.grabInput(false)
    raw(false)
    out.write(LEAVE)
  }
  const onResize = () => {
    if (open) options.onResize()
  }
  out.on('resize', onResize)
  enter()
  const screen: Screen = {
    get width() {
      return out.columns || 80
    },
    get height() {
      return out.rows || 24
    },
    draw(lines) {
      if (!open) return
      const width = screen.width
      out.write(lines.map((line, i) => `\x1b[${i + 1};1H${paint(line, width, options.color)}\x1b[K`).join(''))
    },
    bell() {
      if (open) out.write('\x07')
    },
    async listen() {
      if (term) return
      const tk = await lazyImport<{terminal: Term; default?: {terminal: Term}}>('terminal-kit')
      term = (tk.default ?? tk).terminal
      term.on('key', (name) => {
        if (open) options.onKey(name)
      })
      if (open) term.grabInput({mouse: false})
    },
    async suspend(fn) {
      open = false
      leave()
      try {
        return await fn()
      } finally {
        enter()
        open = true
      }
    },
    close() {
      out.removeListener('resize', onResize)
      if (!open) return
      open = false
      leave()
      stdin.pause()
    },
  }
  return screen
}
