/**
 * `watch`'s notice of a new pending approval: a desktop notification through
 * notify-send where it is on PATH, else the terminal bell.
 */
import {spawn} from 'node:child_process'
import {accessSync, constants} from 'node:fs'
import {delimiter, join} from 'node:path'
import {inertText} from '../lib/util/inert-text.js'

/** notify-send's path on PATH, if any. */
export function findNotifySend(env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const file = join(dir, 'notify-send')
    try {
      accessSync(file, constants.X_OK)
      return file
    } catch {
      // not here
    }
  }
  return undefined
}

/** A notification's body: notification daemons read it as markup, so `<`, `>` and `&` are entities; control characters are inert. Pure. */
export function notificationBody(text: string): string {
  return inertText(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** Notify once: `bell` rings the terminal when there is no notify-send. */
export function notifyPending(text: string, bell: () => void, env: NodeJS.ProcessEnv = process.env): void {
  const notifySend = findNotifySend(env)
  if (!notifySend) return bell()
  const child = spawn(notifySend, ['--app-name=agent-sandbox', 'agent-sandbox: approval pending', notificationBody(text)], {stdio: 'ignore', detached: true})
  child.on('error', bell)
  child.unref()
}
