/**
 * Text from the sandbox (a host name, a path, a branch, a commit subject) made
 * inert for a terminal: every control character a terminal acts on (C0 but tab
 * and newline, DEL, C1 such as U+009B CSI) and the bidirectional overrides
 * that reorder what is shown are replaced by their JSON escape (`\u001b`).
 * The result is still valid JSON where the input was, with the same meaning.
 * Pure.
 */
// eslint-disable-next-line no-control-regex
const ACTIVE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g

export function inertText(text: string): string {
  return text.replace(ACTIVE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}
