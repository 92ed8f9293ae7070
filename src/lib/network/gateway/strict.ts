/**
 * The gateway's HTTP/1 parsing rules on top of llhttp's (node's parser, which
 * already refuses obs-fold, bare LF or CR, NUL and other bytes outside a
 * token, a space before the colon, Content-Length beside Transfer-Encoding,
 * two Content-Length, and heads over 16 KiB). What llhttp lets through and a
 * site behind the gateway might read differently is refused here, so that
 * what a site receives is what the gateway judged. Pure.
 */

/** More header fields than any real client sends; node would silently drop those past 2000. */
export const MAX_HEADER_FIELDS = 500

export interface Refusal {
  status: number
  rule: string
}

/**
 * Refusals from a request's raw head: a second Host, Transfer-Encoding twice
 * or other than `chunked` alone, too many fields, and a body on an upgrade
 * request (bytes after the head of an upgrade wait for the site's 101; a body
 * would be read as those). `rawHeaders` as node gives them (name, value, ...).
 */
export function strictHead(rawHeaders: readonly string[], options: {upgrade: boolean}): Refusal | undefined {
  if (rawHeaders.length / 2 > MAX_HEADER_FIELDS) return {status: 431, rule: `more than ${MAX_HEADER_FIELDS} header fields`}
  let hosts = 0
  let codings = 0
  let length: string | undefined
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i].toLowerCase()
    const value = rawHeaders[i + 1]
    if (name === 'host' && ++hosts > 1) return {status: 400, rule: 'more than one Host header'}
    if (name === 'transfer-encoding') {
      if (++codings > 1) return {status: 400, rule: 'more than one Transfer-Encoding header'}
      if (value.trim().toLowerCase() !== 'chunked') return {status: 400, rule: `Transfer-Encoding ${JSON.stringify(value)} (only chunked is forwarded)`}
    }
    if (name === 'content-length') length = value.trim()
  }
  if (options.upgrade && (codings > 0 || (length !== undefined && length !== '0'))) return {status: 400, rule: 'a body on an upgrade request'}
  return undefined
}

/** What to answer a request node's parser refused (its `code`): 431 for a head too large, 400 otherwise. */
export function parserRefusal(code: string | undefined): Refusal {
  if (code === 'HPE_HEADER_OVERFLOW') return {status: 431, rule: 'request head too large'}
  return {status: 400, rule: `malformed request (${code ?? 'unknown parser error'})`}
}
