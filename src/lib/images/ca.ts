/**
 * The CA certificates an image build trusts. Behind a TLS-inspecting proxy the
 * build's own downloads (npm, apt over https) fail unless the image trusts the
 * proxy's CA. The host already names that CA for its own tools, so a build uses
 * what the host names, unless the user names certificates for the build itself.
 */
import {createHash} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {UsageError} from '../errors.js'

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g

/** Split PEM files (single certificates or bundles) into individual certificates. */
export function splitPem(text: string): string[] {
  return [...text.matchAll(PEM_BLOCK)].map((m) => `${m[0].replace(/\r\n/g, '\n')}\n`)
}

export function readCaCerts(paths: string[]): string[] {
  const certs: string[] = []
  for (const path of paths) {
    let text: string
    try {
      text = readFileSync(path, 'utf8')
    } catch {
      throw new UsageError(`CA certificate file not found or unreadable: ${path}`, {hint: 'pass a PEM file, e.g. --ca-cert /etc/ssl/certs/ca-certificates.crt'})
    }
    const found = splitPem(text)
    if (found.length === 0) throw new UsageError(`no PEM certificate in ${path}`, {hint: 'pass a PEM-encoded certificate or bundle'})
    certs.push(...found)
  }
  return [...new Set(certs)]
}

export function caCertPathsFromEnv(env: NodeJS.ProcessEnv): string[] {
  return (env.AGENT_SANDBOX_CA_CERTS ?? '')
    .split(/[,:]/)
    .map((p) => p.trim())
    .filter(Boolean)
}

/** Where a build's certificates came from: a flag or variable for the build, or the host's own trust settings. */
export interface CaChoice {
  paths: string[]
  /** What named them: `--ca-cert`, `AGENT_SANDBOX_CA_CERTS`, or the host's variables (`NODE_EXTRA_CA_CERTS`, `SSL_CERT_FILE`). */
  source: string
  /** Named by the host for every tool, not for this build: an unusable file is skipped rather than refused. */
  fromHost: boolean
}

/** The host's variables that name a CA bundle, in the order they are read. */
export const HOST_CA_VARIABLES = ['NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE'] as const

/**
 * Which certificates a build trusts: `--ca-cert` (flags) over
 * AGENT_SANDBOX_CA_CERTS over the bundles the host names for its own tools;
 * none when nothing names any. Pure.
 */
export function chooseCaCerts(flags: readonly string[] | undefined, env: NodeJS.ProcessEnv): CaChoice {
  if (flags?.length) return {paths: [...flags], source: '--ca-cert', fromHost: false}
  const own = caCertPathsFromEnv(env)
  if (own.length) return {paths: own, source: 'AGENT_SANDBOX_CA_CERTS', fromHost: false}
  const named = HOST_CA_VARIABLES.filter((name) => env[name]?.trim())
  const paths = [...new Set(named.map((name) => env[name]!.trim()))]
  return {paths, source: named.join(', '), fromHost: true}
}

/** The certificates of a choice: a build's own files must be usable; the host's are skipped (with `skipped` saying which) when not. */
export function readChosenCaCerts(choice: CaChoice): {certs: string[]; skipped: string[]} {
  if (!choice.fromHost) return {certs: readCaCerts(choice.paths), skipped: []}
  const certs: string[] = []
  const skipped: string[] = []
  for (const path of choice.paths) {
    try {
      certs.push(...readCaCerts([path]))
    } catch {
      skipped.push(path)
    }
  }
  return {certs: [...new Set(certs)], skipped}
}

/** One value for a set of certificates, whatever their order: base images carry it as a label. Pure. */
export function caCertsDigest(certs: readonly string[]): string {
  const hash = createHash('sha256')
  for (const cert of [...certs].sort()) hash.update(cert)
  return hash.digest('hex')
}

/** The phrases a build's output holds when a download failed on an untrusted certificate. */
const CERTIFICATE_ERRORS = [
  /SELF_SIGNED_CERT_IN_CHAIN/,
  /DEPTH_ZERO_SELF_SIGNED_CERT/,
  /UNABLE_TO_GET_ISSUER_CERT(?:_LOCALLY)?/,
  /UNABLE_TO_VERIFY_LEAF_SIGNATURE/,
  /CERT_UNTRUSTED/,
  /self[- ]signed certificate(?: in certificate chain)?/i,
  /unable to get local issuer certificate/i,
  /certificate verify failed/i,
  /Certificate verification failed/i,
  /x509: certificate signed by unknown authority/i,
]

/** The certificate error in a failed build's output (the first phrase found, e.g. `SELF_SIGNED_CERT_IN_CHAIN`), if any. Pure. */
export function certificateProblem(output: string): string | undefined {
  for (const pattern of CERTIFICATE_ERRORS) {
    const match = pattern.exec(output)
    if (match) return match[0]
  }
  return undefined
}
