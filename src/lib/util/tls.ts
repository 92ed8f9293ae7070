/**
 * Trust for the TLS connections the CLI opens itself (GitHub App tokens, an
 * engine behind https://).
 *
 * The launcher (bin/agent-sandbox) starts node without NODE_EXTRA_CA_CERTS,
 * because node 20 parses that file as it starts, on every command, whether or
 * not it ever opens a TLS connection (nodejs/node#40524: about 55 ms here), and
 * bin/run.cjs puts the variable back into the environment for child processes.
 * Node's own default trust store therefore lacks those certificates, so a
 * client of ours that needs them passes the full list explicitly: node's
 * bundled roots plus the file, the store node would have built at start-up.
 * (With --use-openssl-ca or --use-system-ca in NODE_OPTIONS node's store is the
 * system's, which this cannot rebuild: the launcher then leaves the variable to node.)
 */
import {readFileSync} from 'node:fs'
import type * as Tls from 'node:tls'
import {builtin} from './lazy-import.js'

/**
 * The CA certificates to pass as `ca` to a TLS client, or undefined for node's
 * default store (no NODE_EXTRA_CA_CERTS). An unreadable file is skipped, as
 * node skips it; the handshake that then fails says which certificate it could
 * not verify, and every child process still prints node's own warning.
 */
export function extraTrust(env: NodeJS.ProcessEnv = process.env): string[] | undefined {
  const file = env.NODE_EXTRA_CA_CERTS
  if (!file) return undefined
  let pem: string
  try {
    pem = readFileSync(file, 'utf8')
  } catch {
    return undefined
  }
  // node:tls here, not at import: `run` and `start` reach this module without opening a TLS connection.
  // One string may hold many PEM certificates (node's `ca` option accepts that).
  return [...builtin<typeof Tls>('node:tls').rootCertificates, pem]
}
