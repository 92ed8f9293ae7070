/** The gateway's request log: one JSON object a line (requests.jsonl in its state directory). */

export interface RequestLogEntry {
  /** ISO time the request (or connection) ended. */
  time: string
  /** The HTTP method; `TLS` for a connection passed through without interception. */
  method: string
  host: string
  /** Without the query (it may hold tokens); empty when not seen (TLS pass-through). */
  path: string
  /** The HTTP status returned to the client; 0 when none was (a refused or passed-through TLS connection). */
  status: number
  /** Bytes of the response body sent to the client. */
  bytes: number
  decision: 'allowed' | 'blocked'
  /** The allowlist entry that admitted it, or why it was refused. */
  rule: string
  /** An allowed request's grant (grants.ts describeGrant): `default`, `config`, `allow`, `allow for 10m until <ISO>`, `allow once`, `allow max-upload 5m (used N)`. */
  grant?: string
}

export const REQUEST_LOG = 'requests.jsonl'

/** Parse log lines; lines that are not entries (a torn last line) are skipped. */
export function parseRequestLog(text: string): RequestLogEntry[] {
  const out: RequestLogEntry[] = []
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue
    try {
      const e = JSON.parse(line) as Partial<RequestLogEntry>
      if (typeof e.time === 'string' && typeof e.host === 'string' && (e.decision === 'allowed' || e.decision === 'blocked')) {
        out.push({time: e.time, method: String(e.method ?? ''), host: e.host, path: String(e.path ?? ''), status: Number(e.status ?? 0), bytes: Number(e.bytes ?? 0), decision: e.decision, rule: String(e.rule ?? ''), ...(typeof e.grant === 'string' ? {grant: e.grant} : {})})
      }
    } catch {
      // a line cut short by rotation
    }
  }
  return out
}

/** One line for people: `TIME DECISION STATUS METHOD host/path BYTES (rule) [grant: GRANT]`. */
export function formatRequest(e: RequestLogEntry): string {
  return `${e.time}  ${e.decision === 'allowed' ? 'ALLOW' : 'BLOCK'}  ${e.status || '-'}  ${e.method}  ${e.host}${e.path}  ${e.bytes}B  (${e.rule})${e.grant ? `  [grant: ${e.grant}]` : ''}`
}
