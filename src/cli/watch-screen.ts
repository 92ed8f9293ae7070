/**
 * `watch`'s terminal: terminal-kit owns the terminal (the alternate screen,
 * raw keys, resize), loaded only by this command (lazyImport); the frame is
 * watch-frame.ts's. Suspending hands the whole terminal to a child (the
 * review's pager) and takes it back.
 */
import {lazyImport} from '../lib/util/lazy-import.js'
import {paint, type Line} from './watch-frame.js'

/** The part of terminal-kit's Terminal that watch uses. */
interface Term {
  width: number
  height: number
  fullscreen(on: boolean | object): void
  hideCursor(hide?: boolean): void
  grabInput(options: false | {mouse?: false}): void
  moveTo(x: number, y: number): void
  noFormat(text: string): void
  eraseLineAfter(): void
  styleReset(): void
  on(event: 'key', handler: (name: string) => void): void
  on(event: 'resize', handler: (width: number, height: number) => void): void
}

export interface Screen {
  readonly width: number
  readonly height: number
  draw(lines: Line[]): void
  bell(): void
  /** Give the terminal to `fn` (a pager), then take it back. */
  suspend<T>(fn: () => Promise<T>): Promise<T>
  close(): void
}

export async function openScreen(options: {color: boolean; onKey: (name: string) => void; onResize: () => void}): Promise<Screen> {
  const tk = await lazyImport<{terminal: Term; default?: {terminal: Term}}>('terminal-kit')
  const term = (tk.default ?? tk).terminal
  const enter = () => {
    term.fullscreen(true)
    term.hideCursor(true)
    term.grabInput({mouse: false})
  }
  const leave = () => {
    term.styleReset()
    term.hideCursor(false)
    term.grabInput(false)
    term.fullscreen(false)
  }
  let open = true
  term.on('key', (name) => {
    if (open) options.onKey(name)
  })
  term.on('resize', () => {
    if (open) options.onResize()
  })
  enter()
  return {
    get width() {
      return term.width
    },
    get height() {
      return term.height
    },
    draw(lines) {
      if (!open) return
      lines.forEach((line, i) => {
        term.moveTo(1, i + 1)
        term.noFormat(paint(line, term.width, options.color))
        term.eraseLineAfter()
      })
    },
    bell() {
      if (open) term.noFormat('\x07')
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
      if (!open) return
      open = false
      leave()
    },
  }
}
