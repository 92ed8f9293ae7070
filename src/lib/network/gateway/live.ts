/**
 * The gateway's live additions: files in its own tmpfs that `firewall allow`
 * appends to over an exec into the gateway container (never reachable from the
 * sandbox, which shares only its network namespace). Each is read again when
 * its size or mtime changes.
 */
import {readFileSync, statSync} from 'node:fs'

/** A getter for `parse(text)` of `path`, re-read when the file changes; `empty` while it does not exist or cannot be read. */
export function watchedFile<T>(path: string, parse: (text: string) => T, empty: T): () => T {
  let stamp = ''
  let value = empty
  return () => {
    let now = ''
    try {
      const st = statSync(path)
      now = `${st.mtimeMs}:${st.size}`
    } catch {
      now = ''
    }
    if (now !== stamp) {
      stamp = now
      try {
        value = now ? parse(readFileSync(path, 'utf8')) : empty
      } catch {
        value = empty
      }
    }
    return value
  }
}

/** The live grants (`grants.jsonl`, grants.ts) and httpRules (`rules.jsonl`) in the gateway's state directory. */
export const LIVE_GRANTS = 'grants.jsonl'
export const LIVE_RULES = 'rules.jsonl'
