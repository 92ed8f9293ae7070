/**
 * The egress gateway's program (bundled as dist/bundle/egress-gateway.cjs and
 * installed in the base image): `node egress-gateway.cjs` serves; it runs in
 * its own container in the sandbox's network namespace (spec-companions.ts
 * buildGatewaySpec). `node egress-gateway.cjs --allow [--limits JSON] DOMAIN...`
 * grants domains in the running gateway (grants.ts; JSON: until, forMs, once, maxUpload), `--rule JSON` an httpRule (firewall allow),
 * and `--describe` prints the rules in force and the masked secrets' names and
 * hosts (never their values; doctor); `--logins` prints the agents' tokens it
 * minted (to the CLI's store); `--secret NAME` takes a new value for
 * one masked secret on stdin (a renewed GitHub App token), which the running
 * gateway reads at its next request (its CA and secrets come first from
 * gateway-container.ts startGatewayContainer's exec).
 * These run over an exec into the gateway container: its tmpfs is out of the
 * sandbox's reach. Messages go to stderr as
 * `egress-gateway: ...`, which `start` reports if the gateway does not come up.
 */
import {appendFileSync, existsSync, readFileSync, renameSync, writeFileSync} from 'node:fs'
import {rootCertificates} from 'node:tls'
import {join} from 'node:path'
import {SECRETS_FILE, serveGateway, type GatewaySecrets} from './lib/network/gateway/server.js'
import {isHttpRule, parseRuleLines, type HttpRule} from './lib/network/gateway/rules.js'
import {LIVE_GRANTS, LIVE_RULES} from './lib/network/gateway/live.js'
import {parseGrantLines} from './lib/network/gateway/grants.js'
import {GATEWAY_DEFAULTS} from './lib/network/gateway/ports.js'
import {parseDomainEnv} from './lib/network/gateway/policy.js'
import {readMinted} from './lib/network/gateway/login-exchange.js'

const say = (message: string) => process.stderr.write(`egress-gateway: ${message}\n`)
const env = process.env
const stateDir = env.AGENT_SANDBOX_GATEWAY_STATE ?? GATEWAY_DEFAULTS.stateDir

function ports(): [number, number] {
  const [h, t] = (env.AGENT_SANDBOX_GATEWAY_PORTS ?? `${GATEWAY_DEFAULTS.httpPort},${GATEWAY_DEFAULTS.tlsPort}`).split(',').map(Number)
  if (!Number.isInteger(h) || !Number.isInteger(t)) throw new Error(`AGENT_SANDBOX_GATEWAY_PORTS must be HTTP,TLS ports, not ${env.AGENT_SANDBOX_GATEWAY_PORTS}`)
  return [h, t]
}

const configRules = () => JSON.parse(env.AGENT_SANDBOX_GATEWAY_RULES || '[]') as HttpRule[]

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--allow') {
    // `--allow [--limits JSON] DOMAIN...`: a grant for each domain, replacing its earlier one (grants.ts).
    const limited = argv[1] === '--limits'
    const limits = limited ? (JSON.parse(argv[2] ?? 'null') as Record<string, unknown>) : {}
    const given = argv.slice(limited ? 3 : 1)
    const domains = given.map((d) => d.toLowerCase()).filter((d) => /^(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/.test(d))
    if (domains.length !== given.length || domains.length === 0) throw new Error(`not a domain: ${given.join(' ')}`)
    const at = Date.now()
    const lines = domains.map((entry) => JSON.stringify({...limits, entry, at}))
    if (parseGrantLines(lines.join('\n')).some((g) => !g)) throw new Error(`not grant limits: ${argv[2]}`)
    appendFileSync(join(stateDir, LIVE_GRANTS), `${lines.join('\n')}\n`, {mode: 0o600})
    return
  }
  if (argv[0] === '--rule') {
    const rule = JSON.parse(argv[1] ?? 'null') as unknown
    if (argv.length !== 2 || !isHttpRule(rule)) throw new Error(`not an httpRule: ${argv.slice(1).join(' ')}`)
    appendFileSync(join(stateDir, LIVE_RULES), `${JSON.stringify(rule)}\n`, {mode: 0o600})
    return
  }
  if (argv[0] === '--describe') {
    const live = existsSync(join(stateDir, LIVE_RULES)) ? parseRuleLines(readFileSync(join(stateDir, LIVE_RULES), 'utf8')) : []
    const file = join(stateDir, SECRETS_FILE)
    const secrets = existsSync(file) ? ((JSON.parse(readFileSync(file, 'utf8')) as GatewaySecrets).secrets ?? []) : []
    process.stdout.write(`${JSON.stringify({rules: [...configRules(), ...live], live, masked: secrets.map((s) => ({name: s.name, hosts: s.hosts}))})}\n`)
    return
  }
  if (argv[0] === '--logins') {
    // The agents' tokens this gateway minted (login-exchange.ts): to the CLI's store on the host, over this exec's stdout.
    process.stdout.write(`${JSON.stringify(readMinted(stateDir))}\n`)
    return
  }
  // From the CLI over this exec's stdin: never an argument, an env variable or a file outside this tmpfs.
  // Written whole and renamed into place, so the serving process never reads half a file.
  const save = (secrets: GatewaySecrets) => {
    const path = join(stateDir, SECRETS_FILE)
    writeFileSync(`${path}.new`, JSON.stringify(secrets), {mode: 0o600})
    renameSync(`${path}.new`, path)
  }
  if (argv[0] === '--secret' && argv[1]) {
    const value = (await stdin()).trim()
    const secrets = JSON.parse(readFileSync(join(stateDir, SECRETS_FILE), 'utf8')) as GatewaySecrets
    const entry = secrets.secrets?.find((s) => s.name === argv[1])
    if (!entry || !value) throw new Error(`--secret: no secret ${argv[1]}, or no value on stdin`)
    entry.value = value
    save(secrets)
    return
  }
  const [httpPort, tlsPort] = ports()
  // It listens only once it holds its CA and secrets (gateway-container.ts startGatewayContainer hands them over first), so that
  // listening means ready: what a one-shot run's entrypoint waits for (entrypoint.sh wait_gateway).
  await handedOver(join(stateDir, SECRETS_FILE))
  const bundle = env.AGENT_SANDBOX_GATEWAY_UPSTREAM_BUNDLE ?? '/etc/ssl/certs/ca-certificates.crt'
  const gateway = await serveGateway({
    httpPort,
    tlsPort,
    listen: ['127.0.0.1', '::1'],
    dnsServer: env.AGENT_SANDBOX_GATEWAY_DNS ?? '127.0.0.1',
    domainFiles: [env.AGENT_SANDBOX_DEFAULT_DOMAINS_FILE ?? '/etc/agent-sandbox/default-domains.txt'],
    allowDomains: parseDomainEnv(env.AGENT_SANDBOX_ALLOW_DOMAINS),
    stateDir,
    upstreamHttpPort: Number(env.AGENT_SANDBOX_GATEWAY_UPSTREAM_HTTP ?? 80),
    upstreamTlsPort: Number(env.AGENT_SANDBOX_GATEWAY_UPSTREAM_TLS ?? 443),
    maxLogBytes: 8 * 1024 * 1024,
    rules: configRules(),
    masked: (env.AGENT_SANDBOX_GATEWAY_MASKED ?? '').split(',').filter(Boolean),
    inspectAll: env.AGENT_SANDBOX_GATEWAY_INSPECT_ALL === '1',
    // Upstreams are verified against node's roots and the image's bundle (build-base --ca-cert, a workspace image's own CAs).
    upstreamCa: [...rootCertificates, ...(existsSync(bundle) ? [readFileSync(bundle, 'utf8')] : [])],
    onError: say,
    // A one-shot run's gateway (spec-companions.ts buildGatewaySpec): the run reads what was refused from the container's log.
    ...(env.AGENT_SANDBOX_GATEWAY_LOG_STDOUT === '1' ? {onRecord: (line: string) => void process.stdout.write(line)} : {}),
  })
  say(`serving on 127.0.0.1:${httpPort} (HTTP) and 127.0.0.1:${tlsPort} (TLS), ${gateway.allowlistSize} domains allowed`)
  const stop = () => void gateway.close().finally(() => process.exit(0))
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

/** Wait for the CLI's CA and secrets (an exec's stdin, written into this tmpfs), polling every 10 ms, for at most SECRETS_WAIT_MS. */
async function handedOver(path: string): Promise<void> {
  for (const until = Date.now() + SECRETS_WAIT_MS; !existsSync(path); ) {
    if (Date.now() > until) throw new Error(`no CA and secrets were handed over within ${SECRETS_WAIT_MS / 1000} s: not serving`)
    await new Promise((r) => setTimeout(r, 10))
  }
}
const SECRETS_WAIT_MS = 120_000

async function stdin(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const c of process.stdin) chunks.push(c as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

main(process.argv.slice(2)).catch((error: unknown) => {
  say(error instanceof Error ? error.message : String(error))
  process.exit(1)
})
