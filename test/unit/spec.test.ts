import {execFileSync} from 'node:child_process'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {defaultSeccompProfile, templatesDir} from '../../src/lib/util/assets.js'
import {describe, expect, it} from 'vitest'
import {DEFAULTS, type Settings} from '../../src/lib/config/schema.js'
import {GATE_URL} from '../../src/lib/contract.js'
import {gatewayUid, parsePort, parseSize, secretValues, specHash, type SandboxSpec} from '../../src/lib/sandbox/spec.js'
import {BASE_CAPS, FIREWALL_CAPS, buildSpec, type SpecOptions} from '../../src/lib/sandbox/spec-sandbox.js'
import {buildGateSpec, buildGatewaySpec} from '../../src/lib/sandbox/spec-companions.js'
import {engineSecurityOpt, toCreateOptions, toDockerRunArgs, toShellCommand} from '../../src/lib/sandbox/spec-render.js'
import {looksSecret} from '../../src/lib/util/secret-names.js'
import {heldSecrets} from '../../src/lib/sandbox/prepare.js'
import {Labels, Names, describeWorkspace, md5, sanitizeBranch} from '../../src/lib/workspace.js'
import {quoteArg} from '../../src/lib/util/shell-quote.js'

const ws = describeWorkspace('/home/me/My Repo', 1000, 1001)
const settings = (over: Partial<Settings> = {}): Settings => ({...structuredClone(DEFAULTS), ...over})
const protectedPaths: SpecOptions['protectedPaths'] = [{relative: '.git/hooks'}, {relative: '.agent-sandbox'}]

describe('the agent\'s own git directory and the push gate', () => {
  const sandbox = buildSpec(ws, settings(), {protectedPaths, ownGit: 'volume'})

  it('mounts a git volume over .git and the host .git read-only at /host-git, and tells the entrypoint', () => {
    const byTarget = Object.fromEntries(sandbox.mounts.map((m) => [m.target, m]))
    expect(byTarget['/workspace/My Repo/.git']).toEqual({type: 'volume', source: `agent-sandbox-${ws.hash}-git`, target: '/workspace/My Repo/.git', readOnly: false})
    expect(byTarget['/host-git']).toEqual({type: 'bind', source: '/home/me/My Repo/.git', target: '/host-git', readOnly: true})
    const env = Object.fromEntries(sandbox.env.map((e) => [e.name, e.value]))
    expect(env).toMatchObject({AGENT_SANDBOX_HOST_GIT: '/host-git', AGENT_SANDBOX_GIT_WORKTREE: '/workspace/My Repo', AGENT_SANDBOX_GATE_URL: GATE_URL})
    expect(sandbox.labels['dev.agent-sandbox.git']).toBe('gate')
  })

  it('gives one-shot containers a tmpfs instead, and branch mode a read-only checkout and no git directory of its own', () => {
    const oneShot = buildSpec(ws, settings(), {protectedPaths, ownGit: 'tmpfs', name: 'x'})
    expect(oneShot.mounts.find((m) => m.target === '/workspace/My Repo/.git')).toMatchObject({type: 'tmpfs'})
    expect(oneShot.labels['dev.agent-sandbox.git']).toBe('throwaway')
    const branch = buildSpec(ws, settings(), {protectedPaths, ownGit: 'volume', branch: 'feat'})
    expect(branch.mounts[0]).toEqual({type: 'bind', source: '/home/me/My Repo', target: '/workspace/My Repo', readOnly: true})
    expect(branch.mounts.map((m) => m.target)).not.toContain('/host-git')
    expect(branch.env.map((e) => e.name)).not.toContain('AGENT_SANDBOX_HOST_GIT')
    expect(buildSpec(ws, settings(), {protectedPaths}).labels['dev.agent-sandbox.git']).toBe('protected')
  })

  it('builds the gate: the owner\'s uid, no capabilities, read-only root, the sandbox\'s network, the host .git writable only there', () => {
    const gate = buildGateSpec(ws, sandbox, settings({protectedBranches: ['main', 'release/*']}), {})
    expect(gate.name).toBe(`${sandbox.name}-gate`)
    expect(gate.user).toBe('1000:1001')
    expect(gate.capAdd).toEqual([])
    expect(gate.capDrop).toEqual(['ALL'])
    expect(gate.securityOpt).toEqual(['no-new-privileges'])
    expect(gate.networkMode).toBe(`container:${sandbox.name}`)
    expect(gate.readOnlyRootfs).toBe(true)
    expect(gate.entrypoint).toEqual(['/usr/local/sbin/git-gate'])
    expect(gate.image).toBe(sandbox.image)
    expect(gate.mounts).toEqual([
      {type: 'bind', source: '/home/me/My Repo', target: '/gate/ws', readOnly: true},
      {type: 'bind', source: '/home/me/My Repo/.git', target: '/gate/ws/.git', readOnly: false},
      {type: 'tmpfs', source: '', target: '/tmp', readOnly: false, options: 'mode=1777'},
    ])
    const env = Object.fromEntries(gate.env.map((e) => [e.name, e.value]))
    expect(env).toEqual({AGENT_SANDBOX_GATE_MODE: 'bind', AGENT_SANDBOX_GATE_PORT: '19418', AGENT_SANDBOX_PROTECTED_BRANCHES: 'main\nrelease/*'})
    expect(gate.labels).toMatchObject({'dev.agent-sandbox.kind': 'gate', 'dev.agent-sandbox.gate-of': sandbox.name})
    expect(buildGateSpec(ws, sandbox, settings(), {branch: 'feat'}).env.find((e) => e.name === 'AGENT_SANDBOX_GATE_MODE')?.value).toBe('branch')
    // Rootless Podman (keep-id): the gate joins the sandbox's user namespace, which owns the network namespace it joins.
    expect(buildGateSpec(ws, sandbox, settings(), {userns: 'keep-id'}).userns).toBe(`container:${sandbox.name}`)
    expect(toCreateOptions(buildGateSpec(ws, sandbox, settings(), {userns: 'keep-id'})).HostConfig?.UsernsMode).toBe(`container:${sandbox.name}`)
    // Hook configuration found at start reaches the gate's pre-receive.
    expect(buildGateSpec(ws, sandbox, settings(), {gateFiles: ['.husky', 'scripts/env.sh']}).env.find((e) => e.name === 'AGENT_SANDBOX_GATE_FILES')?.value).toBe('.husky\nscripts/env.sh')
    expect(buildGateSpec(ws, sandbox, settings(), {}).env.some((e) => e.name === 'AGENT_SANDBOX_GATE_FILES')).toBe(false)
    // protectHookConfig false reaches the dispatcher through agent-git.sh; nothing is said when it is on.
    const off = buildSpec(ws, settings({protectHookConfig: false}), {protectedPaths, ownGit: 'volume'})
    expect(off.env.find((e) => e.name === 'AGENT_SANDBOX_PROTECT_HOOK_CONFIG')?.value).toBe('0')
    expect(sandbox.env.some((e) => e.name === 'AGENT_SANDBOX_PROTECT_HOOK_CONFIG')).toBe(false)
  })

  it('creates the gate with its own entrypoint and read-only root, and show-run prints it after the sandbox', () => {
    const gate = buildGateSpec(ws, sandbox, settings(), {})
    const create = toCreateOptions(gate)
    expect(create.Entrypoint).toEqual(['/usr/local/sbin/git-gate'])
    expect(create.HostConfig?.ReadonlyRootfs).toBe(true)
    expect(create.HostConfig?.Tmpfs).toEqual({'/tmp': 'mode=1777'})
    const shown = toShellCommand(sandbox, [], [gate])
    const [first, second] = shown.split(' && ')
    expect(first).toContain(`--name ${sandbox.name} `)
    expect(second).toContain(`--name ${sandbox.name}-gate `)
    expect(second).toContain(' --entrypoint /usr/local/sbin/git-gate ')
    expect(second).toContain(' --read-only ')
    expect(second).toContain(` --network container:${sandbox.name} `)
    expect(second).toContain(' --tmpfs /tmp:mode=1777 ')
  })
})

describe('the egress gateway', () => {
  const sandbox = buildSpec(ws, settings({allowDomains: ['api.example.com']}), {protectedPaths, gateway: true})

  it('tells the firewall the gateway\'s uid and ports, only with network firewall', () => {
    const env = Object.fromEntries(sandbox.env.map((e) => [e.name, e.value]))
    expect(env.AGENT_SANDBOX_GATEWAY_UID).toBe('65532')
    expect(env.AGENT_SANDBOX_GATEWAY_PORTS).toBe('19080,19443')
    const open = buildSpec(ws, settings(), {protectedPaths, gateway: true, network: 'open'})
    expect(open.env.some((e) => e.name.startsWith('AGENT_SANDBOX_GATEWAY'))).toBe(false)
    expect(buildSpec(ws, settings(), {protectedPaths}).env.some((e) => e.name.startsWith('AGENT_SANDBOX_GATEWAY'))).toBe(false)
  })

  it('never gives the gateway the agent\'s uid', () => {
    expect(gatewayUid({uid: 1000})).toBe(65532)
    expect(gatewayUid({uid: 65532})).toBe(65531)
  })

  it('builds the gateway: its own uid, no capabilities, read-only root, the sandbox\'s network only, the same allowlist', () => {
    const gw = buildGatewaySpec(ws, sandbox, {})
    expect(gw.name).toBe(`${sandbox.name}-gateway`)
    expect(gw.user).toBe('65532:65532')
    expect(gw.capAdd).toEqual([])
    expect(gw.capDrop).toEqual(['ALL'])
    expect(gw.securityOpt).toEqual(['no-new-privileges'])
    expect(gw.readOnlyRootfs).toBe(true)
    expect(gw.networkMode).toBe(`container:${sandbox.name}`)
    expect(gw.mounts).toEqual([{type: 'tmpfs', source: '', target: '/tmp', readOnly: false, options: 'mode=1777'}])
    expect(gw.labels).toMatchObject({'dev.agent-sandbox.kind': 'gateway', 'dev.agent-sandbox.gateway-of': sandbox.name})
    expect(gw.env.find((e) => e.name === 'AGENT_SANDBOX_ALLOW_DOMAINS')?.value).toBe('api.example.com')
    // A sandbox's gateway boots node plainly; a run's, from the image's snapshot where the image has node-boot.
    expect([...(gw.entrypoint ?? []), ...(gw.cmd ?? [])]).toEqual(['/usr/bin/node', '--max-semi-space-size=1', '--optimize-for-size', '/usr/local/lib/agent-sandbox/egress-gateway.cjs'])
    const run = buildGatewaySpec(ws, sandbox, {oneShot: true})
    expect([...(run.entrypoint ?? []), ...(run.cmd ?? [])]).toEqual(['/bin/sh', '-c', '[ -x /usr/local/bin/node-boot ] && exec /usr/local/bin/node-boot "$@"; exec /usr/bin/node "$@"', 'egress-gateway', '--max-semi-space-size=1', '--optimize-for-size', '/usr/local/lib/agent-sandbox/egress-gateway.cjs'])
    expect(buildGatewaySpec(ws, sandbox, {userns: 'keep-id'}).userns).toBe(`container:${sandbox.name}`)
    const shown = toShellCommand(sandbox, [], [gw])
    expect(shown.split(' && ')[1]).toContain(` --network container:${sandbox.name} `)
  })

  it('starts the gateway without the image\'s NODE_EXTRA_CA_CERTS (it builds its own upstream trust) and NODE_OPTIONS; only a run\'s copies its log to stdout', () => {
    const value = (spec: {env: Array<{name: string; value: string}>}, name: string) => spec.env.find((e) => e.name === name)?.value
    const gw = buildGatewaySpec(ws, sandbox, {})
    expect(value(gw, 'NODE_EXTRA_CA_CERTS')).toBe('')
    expect(value(gw, 'NODE_OPTIONS')).toBe('')
    expect(value(gw, 'AGENT_SANDBOX_GATEWAY_LOG_STDOUT')).toBeUndefined()
    expect(value(buildGatewaySpec(ws, sandbox, {oneShot: true}), 'AGENT_SANDBOX_GATEWAY_LOG_STDOUT')).toBe('1')
  })
})

describe('interception and masked secrets', () => {
  const masked = settings({secretEnv: ['PLAIN_TOKEN', {name: 'MASKED_TOKEN', hosts: ['api.example.com']}]})
  const sandbox = buildSpec(ws, masked, {
    protectedPaths,
    gateway: true,
    gatewayCa: 'MIIBcert',
    secretValues: {PLAIN_TOKEN: 'plain-value'},
    surrogates: {MASKED_TOKEN: 'sk-surrogate'},
  })
  const env = (spec: {env: Array<{name: string; value: string; secret: boolean}>}) => Object.fromEntries(spec.env.map((e) => [e.name, e]))

  it('gives the sandbox the CA certificate and the bundle variables, the surrogate as a plain variable, the string form as a secret', () => {
    const e = env(sandbox)
    expect(e.AGENT_SANDBOX_GATEWAY_CA?.value).toBe('MIIBcert')
    expect(e.SSL_CERT_FILE?.value).toBe('/etc/ssl/certs/ca-certificates.crt')
    expect(e.REQUESTS_CA_BUNDLE?.value).toBe('/etc/ssl/certs/ca-certificates.crt')
    expect(e.MASKED_TOKEN).toEqual({name: 'MASKED_TOKEN', value: 'sk-surrogate', secret: false})
    expect(e.PLAIN_TOKEN).toEqual({name: 'PLAIN_TOKEN', value: 'plain-value', secret: true})
    // no surrogate (no gateway): the masked variable is not set at all
    expect(env(buildSpec(ws, masked, {protectedPaths, secretValues: {PLAIN_TOKEN: 'v'}})).MASKED_TOKEN).toBeUndefined()
  })

  it('gives the gateway the rules and the masked names, never a value or a key', () => {
    const gw = buildGatewaySpec(ws, sandbox, {httpRules: [{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}], masked: ['MASKED_TOKEN']})
    const e = env(gw)
    expect(JSON.parse(e.AGENT_SANDBOX_GATEWAY_RULES?.value ?? '')).toEqual([{host: 'registry.npmjs.org', methods: ['GET', 'HEAD']}])
    expect(e.AGENT_SANDBOX_GATEWAY_MASKED?.value).toBe('MASKED_TOKEN')
    expect(JSON.stringify(gw)).not.toMatch(/sk-surrogate|plain-value|PRIVATE KEY/)
    expect(buildGatewaySpec(ws, sandbox, {}).env.some((x) => /RULES|MASKED/.test(x.name))).toBe(false)
  })

  it('labels the sandbox with the masked names and hosts (no value, no surrogate); a gateway made anew reads them back with the surrogates', () => {
    const labelled = buildSpec(ws, masked, {protectedPaths, gateway: true, surrogates: {MASKED_TOKEN: 'sk-surrogate'}, masked: [{name: 'MASKED_TOKEN', hosts: ['api.example.com']}]})
    expect(JSON.parse(labelled.labels[Labels.masked])).toEqual([{name: 'MASKED_TOKEN', hosts: ['api.example.com']}])
    expect(labelled.labels[Labels.masked]).not.toContain('sk-surrogate')
    expect(sandbox.labels[Labels.masked]).toBeUndefined()
    const running = {labels: labelled.labels, env: labelled.env.map((e) => `${e.name}=${e.value}`)}
    expect(heldSecrets(running)).toEqual([{name: 'MASKED_TOKEN', hosts: ['api.example.com'], surrogate: 'sk-surrogate'}])
    // made before the label: nothing held, the gateway follows the current settings
    expect(heldSecrets({labels: {}, env: running.env})).toBeUndefined()
  })

  it("a one-shot run's gateway is the same sidecar, in the run container's network namespace", () => {
    const run = buildSpec(ws, masked, {protectedPaths, gateway: true, name: 'agent-sandbox-run-abc-1234', cmd: ['true'], labels: {[Labels.kind]: 'run'}})
    const gw = buildGatewaySpec(ws, run, {masked: ['MASKED_TOKEN']})
    expect(gw.name).toBe('agent-sandbox-run-abc-1234-gateway')
    expect(gw.networkMode).toBe('container:agent-sandbox-run-abc-1234')
    expect(gw.labels[Labels.gatewayOf]).toBe('agent-sandbox-run-abc-1234')
    expect(env(run).AGENT_SANDBOX_GATEWAY_UID?.value).toBe(String(gatewayUid(ws)))
  })

  it('only a run whose gateway is coming announces it to the entrypoint (AGENT_SANDBOX_RUN_GATEWAY); a sandbox and a plain run do not', () => {
    const opts = {protectedPaths, name: 'agent-sandbox-run-abc-1234', cmd: ['true'], labels: {[Labels.kind]: 'run'}}
    expect(env(buildSpec(ws, masked, {...opts, gateway: true, runGateway: true})).AGENT_SANDBOX_RUN_GATEWAY?.value).toBe('1')
    expect(env(buildSpec(ws, masked, {...opts, gateway: true})).AGENT_SANDBOX_RUN_GATEWAY).toBeUndefined()
    const plainRun = buildSpec(ws, masked, opts)
    expect(env(plainRun).AGENT_SANDBOX_RUN_GATEWAY).toBeUndefined()
    expect(env(plainRun).AGENT_SANDBOX_GATEWAY_UID).toBeUndefined()
    expect(env(buildSpec(ws, masked, {protectedPaths, gateway: true})).AGENT_SANDBOX_RUN_GATEWAY).toBeUndefined()
  })
})

describe('buildSpec', () => {
  const spec = buildSpec(ws, settings(), {protectedPaths})

  it('binds the workspace read-write at /workspace/<repoName>', () => {
    expect(spec.mounts[0]).toEqual({type: 'bind', source: '/home/me/My Repo', target: '/workspace/My Repo', readOnly: false})
    expect(spec.workdir).toBe('/workspace/My Repo')
    expect(spec.name).toBe(Names.container(ws))
    expect(spec.image).toBe(`${Names.image(ws)}:latest`)
  })

  it('mounts protected paths read-only over themselves', () => {
    const ro = spec.mounts.filter((m) => m.readOnly)
    expect(ro).toEqual([
      {type: 'bind', source: '/home/me/My Repo/.git/hooks', target: '/workspace/My Repo/.git/hooks', readOnly: true},
      {type: 'bind', source: '/home/me/My Repo/.agent-sandbox', target: '/workspace/My Repo/.agent-sandbox', readOnly: true},
    ])
  })

  it('tells mount-watch every read-only mount inside the workspace, one a line', () => {
    expect(spec.env).toContainEqual({name: 'AGENT_SANDBOX_PROTECTED_MOUNTS', value: '/workspace/My Repo/.git/hooks\n/workspace/My Repo/.agent-sandbox', secret: false})
    const none = buildSpec(ws, settings(), {protectedPaths: []})
    expect(none.env.map((e) => e.name)).not.toContain('AGENT_SANDBOX_PROTECTED_MOUNTS')
  })

  it('adds the shelf, history and agent config volumes and a tmpfs state dir', () => {
    const byTarget = Object.fromEntries(spec.mounts.map((m) => [m.target, m]))
    expect(byTarget['/repo-shelf']).toEqual({type: 'volume', source: `agent-sbx-repo-${ws.hash}`, target: '/repo-shelf', readOnly: false})
    expect(byTarget['/commandhistory']).toMatchObject({type: 'volume', source: `agent-sandbox-${ws.hash}-history`})
    expect(byTarget['/home/node/.claude']).toMatchObject({type: 'volume', source: 'agent-sandbox-claude-code-config'})
    expect(byTarget['/home/node/.codex']).toMatchObject({type: 'volume', source: 'agent-sandbox-codex-config'})
    expect(byTarget['/run/agent-sandbox']).toMatchObject({type: 'tmpfs'})
    expect(spec.labels['dev.agent-sandbox.volumes'].split(',').sort()).toEqual(
      [`agent-sbx-repo-${ws.hash}`, `agent-sandbox-${ws.hash}-history`, 'agent-sandbox-claude-code-config', 'agent-sandbox-codex-config'].sort(),
    )
  })

  it('uses per-workspace agent config volumes when not shared', () => {
    const priv = buildSpec(ws, settings({sharedAgentConfig: false}), {protectedPaths: []})
    const sources = priv.mounts.map((m) => m.source)
    expect(sources).toContain(`agent-sandbox-${ws.hash}-claude-code-config`)
    expect(sources).toContain(`agent-sandbox-${ws.hash}-codex-config`)
    expect(sources).not.toContain('agent-sandbox-claude-code-config')
  })

  it('runs the entrypoint as root and agents as node', () => {
    expect(spec.user).toBe('root')
    expect(spec.execUser).toBe('node')
  })

  it('drops all capabilities and adds only the firewall ones in firewall mode', () => {
    expect(spec.capDrop).toEqual(['ALL'])
    expect(spec.capAdd).toEqual(FIREWALL_CAPS)
    expect(spec.capAdd).toContain('NET_ADMIN')
    expect(spec.capAdd).not.toContain('SYS_ADMIN')
    expect(spec.securityOpt).toContain('no-new-privileges')
    expect(spec.networkMode).toBe('bridge')
    expect(spec.env).toContainEqual({name: 'AGENT_SANDBOX_NETWORK', value: 'firewall', secret: false})
  })

  it.each(['none', 'open'] as const)('has no NET_ADMIN/NET_RAW in %s mode', (network) => {
    const s = buildSpec(ws, settings({ports: ['3000']}), {protectedPaths, network})
    expect(s.capAdd).toEqual(BASE_CAPS)
    expect(s.capAdd).not.toContain('NET_ADMIN')
    expect(s.capAdd).not.toContain('NET_RAW')
    expect(s.capDrop).toEqual(['ALL'])
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_NETWORK', value: network, secret: false})
    expect(s.labels['dev.agent-sandbox.network']).toBe(network)
  })

  it('uses networkMode none and no ports for network none', () => {
    const s = buildSpec(ws, settings({ports: ['3000'], network: 'none'}), {protectedPaths})
    expect(s.networkMode).toBe('none')
    expect(s.ports).toEqual([])
    expect(toCreateOptions(s).HostConfig?.PortBindings).toEqual({})
    const open = buildSpec(ws, settings({network: 'open', dockerNetwork: 'corp'}), {protectedPaths})
    expect(open.networkMode).toBe('corp')
  })

  it('lets options.network override the settings', () => {
    expect(buildSpec(ws, settings({network: 'open'}), {protectedPaths, network: 'none'}).networkMode).toBe('none')
  })

  it('never exposes the engine socket or runs privileged', () => {
    for (const network of ['firewall', 'none', 'open'] as const) {
      const s = buildSpec(ws, settings({env: {FOO: 'bar'}}), {protectedPaths, network, branch: 'feat/x'})
      for (const m of s.mounts) {
        expect(m.source).not.toMatch(/docker\.sock|podman\.sock/)
        expect(m.target).not.toMatch(/docker\.sock|podman\.sock/)
      }
      expect(s.env.map((e) => e.name)).not.toContain('DOCKER_HOST')
      const create = toCreateOptions(s)
      expect(create.HostConfig?.Privileged).toBe(false)
      expect(create.Env?.some((e) => e.startsWith('DOCKER_HOST='))).toBe(false)
      expect(toDockerRunArgs(s)).not.toContain('--privileged')
      expect(toDockerRunArgs(s).join(' ')).not.toMatch(/docker\.sock/)
    }
  })

  it('parses ports, binding to loopback by default, and announces inbound ports', () => {
    const s = buildSpec(ws, settings({ports: ['3000', '8080:3000', '0.0.0.0:9000:9000/udp']}), {protectedPaths})
    expect(s.ports).toEqual([
      {hostIp: '127.0.0.1', hostPort: '3000', containerPort: '3000', protocol: 'tcp'},
      {hostIp: '127.0.0.1', hostPort: '8080', containerPort: '3000', protocol: 'tcp'},
      {hostIp: '0.0.0.0', hostPort: '9000', containerPort: '9000', protocol: 'udp'},
    ])
    // Published on loopback: from the port publisher only; on another address (the user's opt-in): from any peer.
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_INBOUND_PORTS', value: '3000', secret: false})
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_INBOUND_PEER_PORTS', value: '9000', secret: false})
  })

  it('passes allowed domains and the git identity', () => {
    const s = buildSpec(ws, settings({allowDomains: ['a.com', 'b.com']}), {
      protectedPaths,
      extraAllowDomains: ['b.com', 'c.com'],
      gitIdentity: {name: 'Ada Lovelace', email: 'ada@example.com'},
    })
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_ALLOW_DOMAINS', value: 'a.com,b.com,c.com', secret: false})
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_GIT_NAME', value: 'Ada Lovelace', secret: false})
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_GIT_EMAIL', value: 'ada@example.com', secret: false})
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_UID', value: '1000', secret: false})
    expect(s.env).toContainEqual({name: 'AGENT_SANDBOX_GID', value: '1001', secret: false})
    expect(spec.env.map((e) => e.name)).not.toContain('AGENT_SANDBOX_ALLOW_DOMAINS')
  })

  it('flags secrets: secret-looking env names and secretEnv values', () => {
    const s = buildSpec(ws, settings({env: {GITHUB_TOKEN: 'ghp_x', PLAIN: 'p'}, secretEnv: ['OPENAI_API_KEY', 'ABSENT']}), {
      protectedPaths,
      secretValues: {OPENAI_API_KEY: 'sk-123456'},
    })
    expect(s.env).toContainEqual({name: 'GITHUB_TOKEN', value: 'ghp_x', secret: true})
    expect(s.env).toContainEqual({name: 'PLAIN', value: 'p', secret: false})
    expect(s.env).toContainEqual({name: 'OPENAI_API_KEY', value: 'sk-123456', secret: true})
    expect(s.env.map((e) => e.name)).not.toContain('ABSENT')
    expect(secretValues(s).sort()).toEqual(['ghp_x', 'sk-123456'])
  })

  // The engine reads 0 as no limit: a set limit that converts to 0 must never reach it.
  it.each<[string, Settings['limits'], RegExp]>([
    ['memory "0"', {memory: '0'}, /memory "0" \(at least 6m\)/],
    ['memory "5m"', {memory: '5m'}, /memory "5m"/],
    ['cpus 1e-10 (rounds to 0 nanoCPUs)', {cpus: 1e-10}, /cpus 1e-10 \(at least 0.01\)/],
    ['cpus 0', {cpus: 0}, /cpus 0/],
    ['pids 0', {pids: 0}, /pids 0/],
  ])('refuses a set limit below the engine minimum: %s', (_name, limits, message) => {
    expect(() => buildSpec(ws, settings({limits}), {protectedPaths})).toThrow(message)
  })

  it('converts limits', () => {
    const s = buildSpec(ws, settings({limits: {memory: '4g', cpus: 1.5, pids: 256}}), {protectedPaths})
    expect(s.limits).toEqual({memoryBytes: 4 * 1024 ** 3, nanoCpus: 1_500_000_000, pids: 256})
    expect(spec.limits).toEqual({})
  })

  it('puts a branch sandbox in its worktree', () => {
    const s = buildSpec(ws, settings(), {protectedPaths, branch: 'feat/x'})
    expect(s.workdir).toBe(`/repo-shelf/worktrees/${sanitizeBranch('feat/x')}`)
    expect(s.name).toBe(Names.container(ws, 'feat/x'))
    expect(s.labels['dev.agent-sandbox.branch']).toBe('feat/x')
    expect(s.labels['dev.agent-sandbox.mode']).toBe('branch')
  })

  it('records its own hash in a label', () => {
    expect(spec.labels['dev.agent-sandbox.spec']).toBe(specHash(spec))
    expect(spec.labels['dev.agent-sandbox.hash']).toBe(md5('/home/me/My Repo'))
  })
})

describe('specHash', () => {
  const make = (over: Partial<Settings> = {}, opts: Partial<SpecOptions> = {}) => buildSpec(ws, settings(over), {protectedPaths, ...opts})

  it('is stable for the same input', () => {
    expect(specHash(make({env: {A: '1'}}))).toBe(specHash(make({env: {A: '1'}})))
    expect(specHash(make())).toMatch(/^[0-9a-f]{12}$/)
  })

  it('changes when env, mounts, network or limits change', () => {
    const base = specHash(make({env: {A: '1'}}))
    expect(specHash(make({env: {A: '2'}}))).not.toBe(base)
    expect(specHash(make({env: {A: '1', B: '1'}}))).not.toBe(base)
    expect(specHash(make({env: {A: '1'}}, {protectedPaths: []}))).not.toBe(base)
    expect(specHash(make({env: {A: '1'}, network: 'open'}))).not.toBe(base)
    expect(specHash(make({env: {A: '1'}, limits: {pids: 100}}))).not.toBe(base)
  })

  it('does not depend on secret values', () => {
    const a = make({secretEnv: ['API_TOKEN']}, {secretValues: {API_TOKEN: 'one'}})
    const b = make({secretEnv: ['API_TOKEN']}, {secretValues: {API_TOKEN: 'two'}})
    expect(specHash(a)).toBe(specHash(b))
    expect(JSON.stringify(a.labels)).not.toContain('one')
  })

  it('ignores the spec label itself', () => {
    const s = make()
    const copy: SandboxSpec = {...s, labels: {...s.labels, 'dev.agent-sandbox.spec': 'something else'}}
    expect(specHash(copy)).toBe(specHash(s))
  })
})

/** Split a docker --mount value the way docker's CSV reader does. */
function parseCsv(line: string): string[] {
  const fields: string[] = []
  let field = ''
  let quoted = false
  for (let i = 0; i < line.length; i++) {
    const c = line[i]
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        field += '"'
        i++
      } else if (c === '"') quoted = false
      else field += c
    } else if (c === '"') quoted = true
    else if (c === ',') {
      fields.push(field)
      field = ''
    } else field += c
  }
  fields.push(field)
  return fields
}

interface ParsedRun {
  options: Map<string, string[]>
  mounts: Array<{type: string; source: string; target: string; readOnly: boolean}>
  tmpfs: string[]
  image: string
  cmd: string[]
}

const FLAGS_WITH_VALUE = new Set(['--name', '--user', '--workdir', '--cap-drop', '--cap-add', '--security-opt', '--network', '--label', '--mount', '--tmpfs', '--env', '--publish', '--memory', '--memory-swap', '--cpus', '--pids-limit'])

function parseRunArgs(args: string[]): ParsedRun {
  expect(args[0]).toBe('run')
  const options = new Map<string, string[]>()
  let i = 1
  for (; i < args.length && args[i].startsWith('--'); i++) {
    const flag = args[i]
    if (FLAGS_WITH_VALUE.has(flag)) {
      options.set(flag, [...(options.get(flag) ?? []), args[++i]])
    } else options.set(flag, [...(options.get(flag) ?? []), ''])
  }
  const mounts = (options.get('--mount') ?? []).map((value) => {
    const fields = parseCsv(value)
    const kv = Object.fromEntries(fields.filter((f) => f.includes('=')).map((f) => [f.slice(0, f.indexOf('=')), f.slice(f.indexOf('=') + 1)]))
    return {type: kv.type, source: kv.source, target: kv.target, readOnly: fields.includes('readonly')}
  })
  return {options, mounts, tmpfs: options.get('--tmpfs') ?? [], image: args[i], cmd: args.slice(i + 1)}
}

describe('toDockerRunArgs', () => {
  const spec = buildSpec(describeWorkspace('/srv/a,b "odd" repo', 1000, 1000), settings({
    env: {PLAIN: 'x y', SESSION_COOKIE: 'c00kie-value'},
    secretEnv: ['OPENAI_API_KEY'],
    ports: ['8080:3000', '[::1]:9000:9000/udp'],
    limits: {memory: '512m', cpus: 0.5, pids: 128},
  }), {protectedPaths: [{relative: '.husky'}], secretValues: {OPENAI_API_KEY: 'sk-live-secret'}, cmd: ['sleep', 'infinity']})
  const args = toDockerRunArgs(spec)
  const run = parseRunArgs(args)

  it('prints secrets as --env NAME references only', () => {
    expect(run.options.get('--env')).toContain('OPENAI_API_KEY')
    expect(run.options.get('--env')).toContain('SESSION_COOKIE')
    expect(run.options.get('--env')).toContain('PLAIN=x y')
    expect(args.join('\n')).not.toContain('sk-live-secret')
    expect(args.join('\n')).not.toContain('c00kie-value')
  })

  it('CSV-quotes mount fields holding commas or quotes', () => {
    const wsMount = args[args.indexOf('--mount') + 1]
    expect(wsMount).toBe('type=bind,"source=/srv/a,b ""odd"" repo","target=/workspace/a,b ""odd"" repo"')
    expect(run.mounts[0]).toEqual({type: 'bind', source: '/srv/a,b "odd" repo', target: '/workspace/a,b "odd" repo', readOnly: false})
    expect(run.mounts[1]).toEqual({type: 'bind', source: '/srv/a,b "odd" repo/.husky', target: '/workspace/a,b "odd" repo/.husky', readOnly: true})
    expect(run.mounts.find((m) => m.target === '/repo-shelf')).toBeDefined()
    expect(args).toContain('type=volume,source=agent-sandbox-claude-code-config,target=/home/node/.claude')
  })

  it('prints limits, ports, caps and the image last', () => {
    expect(run.options.get('--memory')).toEqual([`${512 * 1024 ** 2}b`])
    expect(run.options.get('--memory-swap')).toEqual([`${512 * 1024 ** 2}b`])
    expect(run.options.get('--cpus')).toEqual(['0.5'])
    expect(run.options.get('--pids-limit')).toEqual(['128'])
    expect(run.options.get('--publish')).toEqual(['127.0.0.1:8080:3000/tcp', '[::1]:9000:9000/udp'])
    expect(run.options.get('--cap-drop')).toEqual(['ALL'])
    expect(run.options.get('--security-opt')).toEqual(['no-new-privileges', `seccomp=${defaultSeccompProfile}`])
    expect(run.options.get('--user')).toEqual(['root'])
    expect(run.options.has('--init')).toBe(false) // tini is PID 1 from the image itself
    expect(run.options.has('--detach')).toBe(true)
    expect(run.tmpfs).toEqual(['/run/agent-sandbox:mode=755'])
    expect(run.image).toBe(spec.image)
    expect(run.cmd).toEqual(['sleep', 'infinity'])
  })

  it('omits limits that are not set', () => {
    const plain = toDockerRunArgs(buildSpec(ws, settings(), {protectedPaths}))
    for (const flag of ['--memory', '--cpus', '--pids-limit', '--publish']) expect(plain).not.toContain(flag)
  })

  it('agrees with toCreateOptions on mounts, env, caps, network, limits and ports', () => {
    const create = toCreateOptions(spec)
    const host = create.HostConfig!
    expect(run.mounts).toEqual((host.Mounts ?? []).map((m) => ({type: m.Type, source: m.Source, target: m.Target, readOnly: Boolean(m.ReadOnly)})))
    expect(run.tmpfs).toEqual(Object.entries(host.Tmpfs ?? {}).map(([target, opts]) => `${target}:${opts}`))
    const runEnv = run.options.get('--env') ?? []
    expect(runEnv.map((e) => e.split('=')[0])).toEqual((create.Env ?? []).map((e) => e.split('=')[0]))
    for (const entry of runEnv.filter((e) => e.includes('='))) expect(create.Env).toContain(entry)
    for (const name of runEnv.filter((e) => !e.includes('='))) {
      expect(create.Env?.find((e) => e.startsWith(`${name}=`))).toBe(`${name}=${spec.env.find((e) => e.name === name)?.value}`)
    }
    expect(run.options.get('--cap-add')).toEqual(host.CapAdd)
    expect(run.options.get('--cap-drop')).toEqual(host.CapDrop)
    expect(run.options.get('--security-opt')?.map(engineSecurityOpt)).toEqual(host.SecurityOpt)
    expect(run.options.get('--network')).toEqual([host.NetworkMode])
    expect(run.options.get('--user')).toEqual([create.User])
    expect(run.options.get('--workdir')).toEqual([create.WorkingDir])
    expect(run.options.get('--name')).toEqual([create.name])
    expect(run.image).toBe(create.Image)
    expect(run.cmd).toEqual(create.Cmd)
    expect(run.options.get('--memory')).toEqual([`${host.Memory}b`])
    expect(run.options.get('--cpus')).toEqual([String((host.NanoCpus ?? 0) / 1e9)])
    expect(run.options.get('--pids-limit')).toEqual([String(host.PidsLimit)])
    const labels = Object.fromEntries((run.options.get('--label') ?? []).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]))
    expect(labels).toEqual(create.Labels)
    const published = Object.entries(host.PortBindings as Record<string, Array<{HostIp: string; HostPort: string}>>).flatMap(([key, list]) =>
      list.map((b) => `${b.HostIp.includes(':') ? `[${b.HostIp}]` : b.HostIp}:${b.HostPort}:${key}`),
    )
    expect(run.options.get('--publish')?.sort()).toEqual(published.sort())
    expect(Object.keys(create.ExposedPorts ?? {}).sort()).toEqual(['3000/tcp', '9000/udp'])
  })
})

describe('toCreateOptions', () => {
  it('maps the spec to the engine API', () => {
    const spec = buildSpec(ws, settings({limits: {memory: '1g'}}), {protectedPaths})
    const create = toCreateOptions(spec)
    expect(create.HostConfig).toMatchObject({
      Privileged: false,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges', engineSecurityOpt(`seccomp=${defaultSeccompProfile}`)],
      Memory: 1024 ** 3,
      MemorySwap: 1024 ** 3,
      Tmpfs: {'/run/agent-sandbox': 'mode=755'},
    })
    expect(create.HostConfig?.Mounts?.some((m) => (m.Type as string) === 'tmpfs')).toBe(false)
    expect(create.HostConfig?.Mounts).toHaveLength(spec.mounts.length - 1)
    expect(create.Env).toContain('AGENT_SANDBOX_NETWORK=firewall')
    expect(create.HostConfig).not.toHaveProperty('UsernsMode')
  })

  it('creates in the keep-id user namespace on rootless Podman, as root, and show-run says so with podman', () => {
    const spec = buildSpec(ws, settings(), {protectedPaths, userns: 'keep-id'})
    const create = toCreateOptions(spec)
    expect(create.HostConfig?.UsernsMode).toBe('keep-id')
    // keep-id alone would start the container as your uid: the entrypoint needs root.
    expect(create.User).toBe('root')
    const args = toDockerRunArgs(spec)
    expect(args.slice(args.indexOf('--userns'), args.indexOf('--userns') + 2)).toEqual(['--userns', 'keep-id'])
    expect(toShellCommand(spec)).toMatch(/^podman run /)
    expect(toShellCommand(buildSpec(ws, settings(), {protectedPaths}))).toMatch(/^docker run /)
    // Rootful Podman too: the docker CLI would send the seccomp profile's JSON, which Podman opens as a path.
    expect(toShellCommand(buildSpec(ws, settings(), {protectedPaths}), [], [], 'podman')).toMatch(/^podman run .* --security-opt seccomp=\//)
    expect(specHash(spec)).not.toBe(specHash(buildSpec(ws, settings(), {protectedPaths})))
  })
})

describe('SELinux relabelling', () => {
  const ghapp = {secretsDir: '/run/user/1000/agent-sandbox/x', gitOrigin: 'https://github.com', ghHost: 'github.com', allowDomains: []}

  it('relabels every bind mount with auto on an SELinux host: the workspace shared (:z), the token directory private (:Z)', () => {
    const spec = buildSpec(ws, settings(), {protectedPaths, selinux: true, ghapp})
    const create = toCreateOptions(spec)
    expect(create.HostConfig?.Binds).toEqual([
      '/home/me/My Repo:/workspace/My Repo:z',
      '/home/me/My Repo/.git/hooks:/workspace/My Repo/.git/hooks:ro,z',
      '/home/me/My Repo/.agent-sandbox:/workspace/My Repo/.agent-sandbox:ro,z',
      '/run/user/1000/agent-sandbox/x:/run/secrets:ro,Z',
    ])
    // Volumes stay mounts; no bind is mounted twice.
    expect(create.HostConfig?.Mounts?.map((m) => m.Type)).toEqual(['volume', 'volume', 'volume', 'volume'])
    const args = toDockerRunArgs(spec)
    expect(args.filter((_, i) => args[i - 1] === '--volume')).toEqual(create.HostConfig?.Binds)
    expect(args.filter((a, i) => args[i - 1] === '--mount' && a.startsWith('type=bind'))).toEqual([])
  })

  it('follows the setting: off never relabels, on always does, auto only on SELinux hosts', () => {
    expect(toCreateOptions(buildSpec(ws, settings({selinuxRelabel: 'off'}), {protectedPaths, selinux: true})).HostConfig).not.toHaveProperty('Binds')
    expect(toCreateOptions(buildSpec(ws, settings(), {protectedPaths, selinux: false})).HostConfig).not.toHaveProperty('Binds')
    expect(toCreateOptions(buildSpec(ws, settings(), {protectedPaths})).HostConfig).not.toHaveProperty('Binds')
    expect(toCreateOptions(buildSpec(ws, settings({selinuxRelabel: 'on'}), {protectedPaths, selinux: false})).HostConfig?.Binds).toHaveLength(3)
  })

  it('refuses a path with a colon, which a relabelled bind cannot hold', () => {
    const colon = describeWorkspace('/home/me/a:b', 1000, 1000)
    expect(() => buildSpec(colon, settings(), {protectedPaths, selinux: true})).toThrow(/cannot relabel \/home\/me\/a:b for SELinux: the path contains a colon/)
    expect(() => buildSpec(colon, settings(), {protectedPaths, selinux: false})).not.toThrow()
  })
})

describe('quoteArg', () => {
  const words = ['plain', 'with space', "it's", '"double"', '$(touch /tmp/pwned-by-test)', '`id`', '$HOME', 'naïve 日本語 🎉', 'a\nb', '', '-n', '*', 'back\\slash', "'", "''"]

  it('leaves safe words alone and quotes the rest', () => {
    expect(quoteArg('abc-1.2/x=y:z,@%+')).toBe('abc-1.2/x=y:z,@%+')
    expect(quoteArg('a b')).toBe("'a b'")
    expect(quoteArg("it's")).toBe(`'it'\\''s'`)
    expect(quoteArg('')).toBe("''")
  })

  it('round-trips through sh', () => {
    const script = words.map((w) => `printf '%s\\0' ${quoteArg(w)}`).join('; ')
    const out = execFileSync('sh', ['-c', script], {encoding: 'utf8', cwd: '/'})
    expect(out.split('\0').slice(0, -1)).toEqual(words)
  })
})

describe('parsePort', () => {
  it.each([
    ['3000', {hostIp: '127.0.0.1', hostPort: '3000', containerPort: '3000', protocol: 'tcp'}],
    ['8080:3000', {hostIp: '127.0.0.1', hostPort: '8080', containerPort: '3000', protocol: 'tcp'}],
    ['0.0.0.0:8080:3000', {hostIp: '0.0.0.0', hostPort: '8080', containerPort: '3000', protocol: 'tcp'}],
    ['127.0.0.1:8080:3000/udp', {hostIp: '127.0.0.1', hostPort: '8080', containerPort: '3000', protocol: 'udp'}],
    ['53/udp', {hostIp: '127.0.0.1', hostPort: '53', containerPort: '53', protocol: 'udp'}],
    ['[::1]:8080:3000', {hostIp: '::1', hostPort: '8080', containerPort: '3000', protocol: 'tcp'}],
    ['[::]:3000', {hostIp: '::', hostPort: '3000', containerPort: '3000', protocol: 'tcp'}],
  ])('%j', (text, expected) => {
    expect(parsePort(text)).toEqual(expected)
  })
})

describe('parseSize', () => {
  it.each([
    ['1024', 1024],
    ['10b', 10],
    ['1k', 1024],
    ['512m', 512 * 1024 ** 2],
    ['4g', 4 * 1024 ** 3],
    ['4G', 4 * 1024 ** 3],
    ['1.5g', 1.5 * 1024 ** 3],
    [' 2m ', 2 * 1024 ** 2],
  ])('%j → %d', (text, bytes) => {
    expect(parseSize(text)).toBe(bytes)
  })

  it.each(['', 'g', '4gb', '-1m', '4 g', '1t'])('rejects %j', (text) => {
    expect(() => parseSize(text)).toThrow(/not a size/)
  })
})

describe('looksSecret', () => {
  it.each(['GITHUB_TOKEN', 'OPENAI_API_KEY', 'APIKEY', 'db_password', 'AWS_SECRET_ACCESS_KEY', 'NPM_AUTH', 'SSH_PRIVATE_KEY', 'MY_CREDENTIALS', 'SESSION_ID', 'PASSPHRASE'])(
    '%j looks secret',
    (name) => expect(looksSecret(name)).toBe(true),
  )
  it.each(['PATH', 'HOME', 'NODE_ENV', 'LANG', 'EDITOR', 'DEBUG'])('%j does not', (name) => expect(looksSecret(name)).toBe(false))
})

describe('secretValues', () => {
  it('lists non-empty secret values only', () => {
    const spec = buildSpec(ws, settings({env: {EMPTY_TOKEN: '', VISIBLE: 'v'}, secretEnv: ['X']}), {protectedPaths, secretValues: {X: 'xval'}})
    expect(secretValues(spec)).toEqual(['xval'])
  })
})

describe('nested containers (nestedContainers)', () => {
  const profile = join(templatesDir, 'seccomp-nested.json')
  const plain = buildSpec(ws, settings(), {protectedPaths})
  const nested = buildSpec(ws, settings({nestedContainers: true}), {protectedPaths, nestedSeccomp: profile})

  it('adds the seccomp profile, an unmasked /proc, the two devices, the storage volume and DOCKER_HOST; capabilities unchanged', () => {
    expect(nested.securityOpt).toEqual(['no-new-privileges', `seccomp=${profile}`, 'systempaths=unconfined'])
    expect(nested.devices).toEqual(['/dev/fuse', '/dev/net/tun'])
    expect(nested.capAdd).toEqual(plain.capAdd)
    expect(nested.mounts.find((m) => m.target === '/home/node/.local/share/containers')).toEqual({type: 'volume', source: Names.nestedVolume(ws), target: '/home/node/.local/share/containers', readOnly: false})
    const env = Object.fromEntries(nested.env.map((e) => [e.name, e.value]))
    expect(env).toMatchObject({AGENT_SANDBOX_NESTED: '1', DOCKER_HOST: 'unix:///run/agent-sandbox/podman/podman.sock', TESTCONTAINERS_HOST_OVERRIDE: '127.0.0.1'})
    expect(nested.labels['dev.agent-sandbox.nested']).toBe('1')
    expect(nested.labels['dev.agent-sandbox.spec']).not.toBe(plain.labels['dev.agent-sandbox.spec'])
  })

  it('without it, none of that', () => {
    expect(plain.securityOpt).toEqual(['no-new-privileges', `seccomp=${defaultSeccompProfile}`])
    expect(plain.devices).toBeUndefined()
    expect(plain.env.map((e) => e.name)).not.toContain('DOCKER_HOST')
    expect(plain.labels['dev.agent-sandbox.nested']).toBeUndefined()
    const options = toCreateOptions(plain)
    expect(options.HostConfig?.MaskedPaths).toBeUndefined()
    expect(options.HostConfig?.Devices).toBeUndefined()
  })

  it('sends the profile\'s JSON and empty masked paths to the API, and prints the CLI\'s options for show-run', () => {
    const options = toCreateOptions(nested)
    const seccomp = options.HostConfig?.SecurityOpt?.find((o: string) => o.startsWith('seccomp='))
    expect(JSON.parse(seccomp?.slice('seccomp='.length) ?? '')).toEqual(JSON.parse(readFileSync(profile, 'utf8')))
    expect(options.HostConfig?.SecurityOpt).not.toContain('systempaths=unconfined')
    expect(options.HostConfig?.MaskedPaths).toEqual([])
    expect(options.HostConfig?.ReadonlyPaths).toEqual([])
    expect(options.HostConfig?.Devices).toEqual([
      {PathOnHost: '/dev/fuse', PathInContainer: '/dev/fuse', CgroupPermissions: 'rwm'},
      {PathOnHost: '/dev/net/tun', PathInContainer: '/dev/net/tun', CgroupPermissions: 'rwm'},
    ])
    const args = toDockerRunArgs(nested).join(' ')
    expect(args).toContain(`--security-opt seccomp=${profile} --security-opt systempaths=unconfined --device /dev/fuse --device /dev/net/tun`)
  })

  it('a registry preset allowlists its registry, token service and blob hosts; none by default', () => {
    const allow = (over: Partial<Settings>) => buildSpec(ws, settings(over), {protectedPaths}).env.find((e) => e.name === 'AGENT_SANDBOX_ALLOW_DOMAINS')?.value.split(',')
    expect(allow({})).toBeUndefined()
    expect(allow({registries: ['docker.io']})).toEqual(['docker.io', 'registry-1.docker.io', 'auth.docker.io', 'index.docker.io', 'production.cloudflare.docker.com'])
    expect(allow({registries: ['ghcr.io', 'quay.io'], allowDomains: ['ghcr.io']})).toEqual(['ghcr.io', 'pkg-containers.githubusercontent.com', 'quay.io', 'cdn.quay.io', 'cdn01.quay.io', 'cdn02.quay.io', 'cdn03.quay.io'])
  })

  it('a one-shot container keeps its nested images on a tmpfs of its own, never the sandbox\'s volume', () => {
    const oneShot = buildSpec(ws, settings({nestedContainers: true}), {protectedPaths, nestedSeccomp: profile, nestedStore: 'tmpfs', name: 'x'})
    expect(oneShot.mounts.find((m) => m.target === '/home/node/.local/share/containers')).toEqual({type: 'tmpfs', source: '', target: '/home/node/.local/share/containers', readOnly: false, options: 'exec,mode=0755'})
    expect(oneShot.mounts.map((m) => m.source)).not.toContain(Names.nestedVolume(ws))
    expect(toCreateOptions(oneShot).HostConfig?.Tmpfs?.['/home/node/.local/share/containers']).toBe('exec,mode=0755')
  })

  it('refuses nestedContainers without the profile', () => {
    expect(() => buildSpec(ws, settings({nestedContainers: true}), {protectedPaths})).toThrow(/seccomp profile/)
  })

  it('the profile allows user namespaces and mounts, and keeps what the default refuses refused', () => {
    const json = JSON.parse(readFileSync(profile, 'utf8')) as {defaultAction: string; syscalls: Array<{names: string[]; action: string}>}
    expect(json.defaultAction).toBe('SCMP_ACT_ERRNO')
    const allowed = new Set(json.syscalls.filter((s) => s.action === 'SCMP_ACT_ALLOW').flatMap((s) => s.names))
    // Exactly the calls measured as needed (docs/security.md): removing any one breaks run, a bridge network or build.
    const nestedGroup = json.syscalls[json.syscalls.length - 1]
    expect([...nestedGroup.names].sort()).toEqual(['chroot', 'clone', 'mount', 'mount_setattr', 'move_mount', 'open_tree', 'pivot_root', 'sethostname', 'setns', 'umount2', 'unshare'])
    for (const call of ['unshare', 'clone', 'setns', 'mount', 'umount2', 'pivot_root']) expect(allowed, call).toContain(call)
    for (const call of ['bpf', 'perf_event_open', 'init_module', 'finit_module', 'kexec_load', 'keyctl', 'add_key', 'reboot', 'settimeofday', 'open_by_handle_at', 'syslog', 'fsopen', 'fsmount', 'setdomainname']) {
      expect(allowed, call).not.toContain(call)
    }
  })
})
