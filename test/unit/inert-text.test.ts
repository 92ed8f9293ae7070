import {describe, expect, it} from 'vitest'
import {notificationBody} from '../../src/cli/watch-notify.js'
import {buildFrame, paint} from '../../src/cli/watch-frame.js'
import {formatRequest} from '../../src/lib/network/gateway/log.js'
import {inertText} from '../../src/lib/util/inert-text.js'
import {initialState, reduce} from '../../src/lib/watch/model.js'

// What a hostile request can carry in its SNI, path or branch: an escape sequence (title, clipboard, colour),
// its one-character C1 form, a bell, a carriage return, and a right-to-left override.
const HOSTILE = '\u001b]52;c;cm0gLXJmIH4=\u0007\u009b2J\r\u202eevil\u007f'

describe('inertText', () => {
  it('replaces every control character a terminal acts on, and the bidirectional overrides, by its JSON escape', () => {
    expect(inertText(HOSTILE)).toBe('\\u001b]52;c;cm0gLXJmIH4=\\u0007\\u009b2J\\u000d\\u202eevil\\u007f')
    // eslint-disable-next-line no-control-regex
    expect(inertText(HOSTILE)).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/)
  })

  it('keeps tab, newline and any other text as it is', () => {
    expect(inertText('a\tb\nc · é 名 🙂')).toBe('a\tb\nc · é 名 🙂')
  })

  it('keeps JSON valid and its meaning: the escape it writes is JSON\'s own', () => {
    const value = {host: HOSTILE, path: '/\u0085'}
    expect(JSON.parse(inertText(JSON.stringify(value)))).toEqual(value)
  })

  it('makes the request log line and the watch screen inert', () => {
    const entry = {time: '2026-01-01T00:00:00.000Z', method: 'TLS', host: HOSTILE, path: '', status: 0, bytes: 0, decision: 'blocked' as const, rule: 'not allowlisted'}
    // formatRequest is the log's text; the command layer's out() makes it inert (cli/command.ts).
    expect(inertText(formatRequest(entry))).toContain('\\u001b]52')
    const listed = reduce(initialState(), {type: 'sandboxes', sandboxes: [{name: 'sb', repo: 'app', path: '/src/sb', mode: 'bind', branch: '', state: 'running', running: true, network: 'firewall'}]})
    const state = reduce(listed, {type: 'request', sandbox: 'sb', entry})
    const screen = buildFrame(state, 30, Date.parse('2026-01-01T00:00:01Z')).map((l) => paint(l, 300, false)).join('\n')
    expect(screen).toContain('\\u009b2J')
    // eslint-disable-next-line no-control-regex
    expect(screen).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e]/)
  })

  it('escapes a notification body: markup entities, control characters inert', () => {
    expect(notificationBody('sb: <b>x</b> & \u001b[2J')).toBe('sb: &lt;b&gt;x&lt;/b&gt; &amp; \\u001b[2J')
  })
})
