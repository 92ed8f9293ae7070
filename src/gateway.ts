/**
 * The egress gateway's program (bundled as dist/bundle/egress-gateway.cjs and
 * installed in the base image): `node egress-gateway.cjs` serves; it runs in
 * its own container in the sandbox's network namespace (spec.ts
 * buildGatewaySpec). `node egress-gateway.cjs --allow DOMAIN...` adds domains to
 * the running gateway's allowlist (firewall allow). Messages go to stderr as
 * `egress-gateway: ...`, which `start` reports if the gateway does not come up.
 */
import {appendFileSync} from 'node:fs'
import {join} from 'node:path'
import {startGateway} from './lib/network/gateway/server.js'
import {GATEWAY_DEFAULTS} from './lib/network/gateway/ports.js'
import {parseDomainEnv} from './lib/network/gateway/policy.js'

const say = (message: string) => process.stderr.write(`egress-gateway: ${message}\n`)
const env = process.env
const stateDir = env.AGENT_SANDBOX_GATEWAY_STATE ?? GATEWAY_DEFAULTS.stateDir

function ports(): [number, number] {
  const [h, t] = (env.AGENT_SANDBOX_GATEWAY_PORTS ?? `${GATEWAY_DEFAULTS.httpPort},${GATEWAY_DEFAULTS.tlsPort}`).split(',').map(Number)
  if (!Number.isInteger(h) || !Number.isInteger(t)) throw new Error(`AGENT_SANDBOX_GATEWAY_PORTS must be HTTP,TLS ports, not ${env.AGENT_SANDBOX_GATEWAY_PORTS}`)
  return [h, t]
}

async function main(argv: string[]): Promise<void> {
  if (argv[0] === '--allow') {
    const domains = argv.slice(1).map((d) => d.toLowerCase()).filter((d) => /^(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/.test(d))
    if (domains.length !== argv.length - 1) throw new Error(`not a domain: ${argv.slice(1).join(' ')}`)
    appendFileSync(join(stateDir, 'allowlist'), `${domains.join('\n')}\n`, {mode: 0o600})
    return
  }
  const [httpPort, tlsPort] = ports()
  const gateway = await startGateway({
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
    onError: say,
  })
  say(`serving on 127.0.0.1:${httpPort} (HTTP) and 127.0.0.1:${tlsPort} (TLS), ${gateway.allowlistSize} domains allowed`)
  const stop = () => void gateway.close().finally(() => process.exit(0))
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
}

main(process.argv.slice(2)).catch((error: unknown) => {
  say(error instanceof Error ? error.message : String(error))
  process.exit(1)
})
