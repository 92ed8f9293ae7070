// @ts-check
/**
 * The scenarios: each pairs one of our commands (A) with the raw engine or
 * runtime operation it wraps (B). Both arms are whole processes; `before` and
 * `after` hooks run untimed around every measured run.
 */
import {mkdirSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {chownSync} from 'node:fs'
import {BASE_TAG, BENCH_LABEL, OWNER, REPO, cliArgv, cliSync, copyRepo, docker, makeGitWorkspace, sh} from './lib/fixtures.js'

/**
 * @typedef {import('./lib/measure.js').Step} Step
 * @typedef {{
 *   id: string, root: string, env: Record<string, string | undefined>, smoke: boolean,
 *   ws: string, name: string, image: string, baseImage: string,
 *   repoCache?: string, big?: string, parallel: number, listCount: number, extra: Record<string, unknown>
 * }} Ctx
 * @typedef {{steps: (ctx: Ctx) => Step[], parallel?: boolean, before?: (ctx: Ctx) => void, after?: (ctx: Ctx) => void}} Arm
 * @typedef {{
 *   key: string, title: string, ours: string, base: string,
 *   target?: number, targetDiffMs?: number, smoke: boolean, runs?: number, cheap?: boolean,
 *   setup?: (ctx: Ctx) => void | Promise<void>, teardown?: (ctx: Ctx) => void,
 *   a: Arm, b: Arm, note?: (ctx: Ctx) => string
 * }} Scenario
 */

const cli = (ctx, ...args) => ({argv: cliArgv(...args), env: ctx.env})
/** The CA bundle a user behind a TLS-inspecting proxy would name in NODE_EXTRA_CA_CERTS (the system's, ~140 certificates). */
const SYSTEM_CA = '/etc/ssl/certs/ca-certificates.crt'
const noExtraCa = {NODE_EXTRA_CA_CERTS: undefined}
const psSandboxes = ['ps', '-a', '--filter', 'label=dev.agent-sandbox.managed=true', '--filter', 'label=dev.agent-sandbox.kind=sandbox']
const dockerStep = (...args) => ({argv: ['docker', ...args]})
const label = (ctx) => ['--label', `${BENCH_LABEL}=${ctx.id}`]
const rmForce = (name) => sh('docker', ['rm', '-f', name], {allowFailure: true})
/** A sandbox, its push gate and its egress gateway (those first: Podman keeps a container another one's network depends on). */
const rmSandbox = (name) => {
  rmForce(`${name}-gate`)
  rmForce(`${name}-gateway`)
  rmForce(name)
}

/** A new copy of the generated repository: a new workspace path, so a new (absent) repo-shelf. */
function freshCopy(ctx) {
  ctx.extra.copies = Number(ctx.extra.copies ?? 0) + 1
  ctx.extra.current = copyRepo(/** @type {string} */ (ctx.repoCache), join(ctx.root, 'big', `copy-${String(ctx.extra.copies)}`, 'bigrepo'))
}
const current = (ctx) => /** @type {string} */ (ctx.extra.current)

/** The baseline for a first provision: clone without checkout, then add the worktree, as plain git in a plain container. */
function plainProvision(ctx, volume, workspace) {
  const repoName = 'bigrepo'
  const script = [
    `/usr/bin/git clone --quiet --no-checkout /workspace/${repoName} /repo-shelf/repo`,
    '/usr/bin/git -C /repo-shelf/repo worktree add --quiet -b b1 /repo-shelf/worktrees/b1 origin/main',
  ].join(' && ')
  return dockerStep(
    'run', '--rm', ...label(ctx), '--user', `${OWNER}:${OWNER}`, '--network', 'none', '--env', 'HOME=/tmp',
    '--mount', `type=volume,source=${volume},target=/repo-shelf`,
    '--mount', `type=bind,source=${workspace},target=/workspace/${repoName},readonly`,
    '--entrypoint', '/bin/sh', ctx.baseImage, '-c', script,
  )
}

/**
 * Nested containers: a sandbox started with --nested, and one small image
 * (the sandbox's own dash, cat and true with their libraries) both inside it and on
 * the host, plus a build context in the workspace. Made once for both nested rows.
 */
function nestedSetup(ctx) {
  if (ctx.extra.nested) return
  const ws = makeGitWorkspace(ctx.root, 'nested')
  cliSync(ctx.root, ['init', ws])
  const {name} = JSON.parse(cliSync(ctx.root, ['start', ws, '--nested', '--json']).stdout)
  const inside = `localhost/bench-mini:1`
  const make = `set -e
files="/usr/bin/dash /usr/bin/cat /usr/bin/true"
libs=$(ldd $files | grep -o '/[^ ]*' | sort -u)
tar -ch $files $libs 2>/dev/null | docker import - ${inside} > /dev/null
docker save -o /tmp/bench-mini.tar ${inside}`
  docker('exec', '-u', 'node', name, '/usr/local/bin/sandbox-exec', 'bash', '-c', make)
  const tarball = join(ctx.root, 'bench-mini.tar')
  docker('cp', `${name}:/tmp/bench-mini.tar`, tarball)
  docker('load', '-i', tarball)
  const host = `asb-bench-${ctx.id}-mini:1`
  docker('tag', inside, host)
  docker('rmi', inside)
  // A 3-step build: a RUN, a COPY, a RUN; the base image is a build argument (its name differs inside).
  const dir = join(ws, 'ctx')
  mkdirSync(dir)
  writeFileSync(join(dir, 'Dockerfile'), 'ARG BASE\nFROM $BASE\nRUN ["/usr/bin/dash", "-c", "echo one > /one"]\nCOPY f /f\nRUN ["/usr/bin/cat", "/f", "/one"]\n')
  writeFileSync(join(dir, 'f'), 'f\n')
  for (const f of ['', 'Dockerfile', 'f']) chownSync(join(dir, f), OWNER, OWNER)
  ctx.extra.nested = {name, inside, host, dir, insideDir: '/workspace/nested/ctx'}
}
/** @returns {{name: string, inside: string, host: string, dir: string, insideDir: string}} */
const nestedOf = (ctx) => /** @type {any} */ (ctx.extra.nested)
const asAgent = (ctx, ...argv) => dockerStep('exec', '-u', 'node', nestedOf(ctx).name, '/usr/local/bin/sandbox-exec', ...argv)

/** A repository using every hook framework hook-config.ts knows (files only: detection reads no git). */
function everyFrameworkRepo(root) {
  const files = {
    '.git/HEAD': 'ref: refs/heads/main\n',
    '.git/config': '[core]\n\thooksPath = .husky/_\n',
    '.husky/_/h': '#!/usr/bin/env sh\n',
    '.husky/pre-commit': '. scripts/hooks/env.sh\nnpx lint-staged\n',
    '.husky/commit-msg': 'npx --no -- commitlint --edit "$1"\n',
    'scripts/hooks/env.sh': 'export X=1\n',
    'lefthook.yml': 'pre-commit:\n',
    '.lefthook-local.yml': '',
    '.pre-commit-config.yaml': 'repos: []\n',
    '.overcommit.yml': '',
    '.lintstagedrc.json': '{}',
    'commitlint.config.mjs': 'export default {}\n',
    '.simple-git-hooks.json': '{}',
    'package.json': JSON.stringify({name: 'x', 'lint-staged': {}, commitlint: {}, 'simple-git-hooks': {}, dependencies: {a: '1'}}),
  }
  for (const hook of ['pre-commit', 'commit-msg', 'pre-push', 'post-checkout', 'post-merge', 'prepare-commit-msg']) files[`.husky/_/${hook}`] = '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n'
  for (let i = 0; i < 40; i++) files[`src/file-${i}.ts`] = ''
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), {recursive: true})
    writeFileSync(join(root, path), text)
  }
  return root
}
/** One process: import hook-config.js (as `start` does) and detect over DIR. */
const detectStep = (dir) => ({
  argv: ['node', '--input-type=module', '-e', 'const m = await import(process.argv[1]); m.detectHookConfig(m.fsHookProbe(process.argv[2]), process.argv[2])', join(REPO, 'dist', 'lib', 'git', 'hook-config.js'), dir],
  env: noExtraCa,
})

/**
 * `cheap`: a scenario of well under 200 ms runs three times as many pairs. On this
 * kind of machine the median ratio of 7 such pairs moves by ±0.15 from one run to
 * the next; 21 cost a few seconds more.
 * @type {Scenario[]}
 */
/** An HTTPS test site for the gateway row: node's https with a self-signed certificate, on a network of the bench's own. */
const SITE = "require('https').createServer({cert: process.env.CERT, key: process.env.KEY}, (q, r) => r.end('ok')).listen(443)"
/** `$2` sequential HTTPS GETs with curl (200; 20 in the smoke run), to the site's address under its name (`$0`, `$1`). */
const GETS = 'for i in $(seq "$2"); do curl -skf -o /dev/null --resolve "$0:443:$1" "https://$0/" || exit 1; done'
const getsArgs = (ctx) => [extra(ctx, 'gwSite'), extra(ctx, 'gwAddress'), ctx.smoke ? '20' : '200']

/** The gateway row's sandbox: on its own network with the site allowlisted; its name, the site's and its address in ctx.extra. */
function gatewaySetup(ctx) {
  const net = `asb-bench-${ctx.id}-gwnet`
  const site = `asb-bench-${ctx.id}-site`
  docker('network', 'create', ...label(ctx), net)
  const dir = join(ctx.root, 'gw-cert')
  mkdirSync(dir, {recursive: true})
  sh('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', `/CN=${site}`, '-addext', `subjectAltName=DNS:${site}`, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')])
  const pem = (f) => sh('cat', [join(dir, f)]).stdout
  docker('run', '-d', '--name', site, ...label(ctx), '--network', net, '-e', `CERT=${pem('cert.pem')}`, '-e', `KEY=${pem('key.pem')}`, '--entrypoint', 'node', '--user', 'root', ctx.baseImage, '-e', SITE)
  const ws = makeGitWorkspace(ctx.root, 'gw')
  cliSync(ctx.root, ['init', ws])
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify({dockerNetwork: net, allowDomains: [site]}, null, 2)}\n`)
  cliSync(ctx.root, ['trust', ws, '--yes'])
  const name = JSON.parse(cliSync(ctx.root, ['start', ws, '--json']).stdout).name
  // The site's address, looked up through the sandbox's resolver: that also opens it in the firewall.
  const address = sh('docker', ['exec', '-u', 'node', name, 'sandbox-exec', 'getent', 'ahostsv4', site]).stdout.split(/\s/)[0]
  Object.assign(ctx.extra, {gwNet: net, gwSite: site, gwSandbox: name, gwAddress: address, gwWs: ws})
}

function gatewayTeardown(ctx) {
  const name = /** @type {string} */ (ctx.extra.gwSandbox)
  if (name) rmSandbox(name)
  rmForce(`asb-bench-${ctx.id}-site`)
  sh('docker', ['network', 'rm', `asb-bench-${ctx.id}-gwnet`], {allowFailure: true})
  // The next row with this set-up makes its workspace again.
  if (ctx.extra.gwWs) rmSync(extra(ctx, 'gwWs'), {recursive: true, force: true})
}

const extra = (ctx, key) => String(ctx.extra[key])
/** A request the gateway refuses and queues: the site's address, a name not on the allowlist. */
const blockedRequest = (ctx) =>
  dockerStep('exec', '-u', 'node', extra(ctx, 'gwSandbox'), '/usr/local/bin/sandbox-exec', 'curl', '-s', '-o', '/dev/null', '--resolve', `asb-bench-${ctx.id}-asked:80:${extra(ctx, 'gwAddress')}`, `http://asb-bench-${ctx.id}-asked/`)

/**
 * The interception rows' site: `/` answers `ok`, `/big` streams $SIZE MiB. Its certificate comes from a
 * bench CA that the workspace image trusts (a line in its Dockerfile, as a company image trusts its own
 * CA), so the gateway, which verifies what it re-originates, accepts it.
 */
const SITE_BIG = `const chunk = Buffer.alloc(1 << 20, 'x');
require('https').createServer({cert: process.env.CERT, key: process.env.KEY}, (q, r) => {
  if (q.url !== '/big') return r.end('ok');
  let left = Number(process.env.SIZE);
  r.writeHead(200, {'content-length': left * chunk.length});
  const more = () => { while (left > 0) { left--; if (!r.write(chunk)) return void r.once('drain', more) } r.end() };
  more();
}).listen(443);`
/**
 * The download floor: the least a node program that terminates TLS can do, a bare relay (no HTTP,
 * node's default flags) on 127.0.0.1:${RELAY_PORT} that decrypts what the client sends, encrypts it again
 * to the site (verified), and back.
 */
const RELAY_PORT = 18443
const RELAY = `const tls = require('tls');
tls.createServer({cert: process.env.CERT, key: process.env.KEY}, (c) => {
  const u = tls.connect({host: process.env.ADDRESS, port: 443, servername: process.env.SITE, ca: process.env.CA}, () => { c.pipe(u); u.pipe(c) });
  u.on('error', () => c.destroy()); c.on('error', () => u.destroy());
}).listen(${RELAY_PORT}, '127.0.0.1');`
/**
 * The pass-through floor: the least a node program between client and site can do, a bare TCP relay
 * (no TLS, node's default flags) on 127.0.0.1:${TCP_RELAY_PORT} that pipes the bytes both ways.
 */
const TCP_RELAY_PORT = 18444
const TCP_RELAY = `const net = require('net');
net.createServer((c) => {
  const u = net.connect({host: process.env.ADDRESS, port: 443}, () => { c.pipe(u); u.pipe(c) });
  u.on('error', () => c.destroy()); c.on('error', () => u.destroy());
}).listen(${TCP_RELAY_PORT}, '127.0.0.1');`
/** `$2` sequential verified HTTPS GETs (trust: the system bundle, which holds the bench CA and, in the sandbox, the gateway's CA). */
const GETS_VERIFIED = 'for i in $(seq "$2"); do curl -sf -o /dev/null --resolve "$0:443:$1" "https://$0/" || exit 1; done'
/** One download of `/big`, failing unless all of it arrived. */
const DOWNLOAD = 'test "$(curl -sf -o /dev/null -w "%{size_download}" --resolve "$0:443:$1" "https://$0/big")" = "$2"'
/** The same through the relay on 127.0.0.1:$2 (the floor row). */
const DOWNLOAD_VIA_RELAY = 'test "$(curl -sf -o /dev/null -w "%{size_download}" --resolve "$0:$2:127.0.0.1" "https://$0:$2/big")" = "$1"'
const DOWNLOAD_MIB = (ctx) => (ctx.smoke ? 20 : 200)

/**
 * A sandbox whose gateway intercepts the site (an httpRules entry for it: GET and HEAD), on a network of
 * the bench's own. Made once for the interception rows; ctx.extra.gwi holds its names.
 */
function interceptSetup(ctx) {
  if (ctx.extra.gwi) return
  const net = `asb-bench-${ctx.id}-gwinet`
  const site = `asb-bench-${ctx.id}-gwisite`
  docker('network', 'create', ...label(ctx), net)
  const dir = join(ctx.root, 'gwi-cert')
  mkdirSync(dir, {recursive: true})
  const ssl = (...args) => sh('openssl', args, {cwd: dir})
  ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=bench CA', '-keyout', 'ca.key', '-out', 'ca.pem')
  ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-subj', `/CN=${site}`, '-keyout', 'key.pem', '-out', 'site.csr')
  writeFileSync(join(dir, 'ext.cnf'), `subjectAltName=DNS:${site}\n`)
  ssl('x509', '-req', '-in', 'site.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'ext.cnf', '-out', 'cert.pem')
  writeFileSync(join(dir, 'pass-ext.cnf'), `subjectAltName=DNS:asb-bench-${ctx.id}-gwpsite\n`)
  ssl('x509', '-req', '-in', 'site.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '1', '-extfile', 'pass-ext.cnf', '-out', 'pass-cert.pem')
  const pem = (f) => sh('cat', [join(dir, f)]).stdout
  const size = DOWNLOAD_MIB(ctx)
  docker('run', '-d', '--name', site, ...label(ctx), '--network', net, '-e', `CERT=${pem('cert.pem')}`, '-e', `KEY=${pem('key.pem')}`, '-e', `SIZE=${size}`, '--entrypoint', 'node', '--user', 'root', ctx.baseImage, '-e', SITE_BIG)
  // The pass-through row's site: allowlisted, with neither rules nor a masked secret, so its TLS is passed through.
  const passSite = `asb-bench-${ctx.id}-gwpsite`
  docker('run', '-d', '--name', passSite, ...label(ctx), '--network', net, '-e', `CERT=${pem('pass-cert.pem')}`, '-e', `KEY=${pem('key.pem')}`, '-e', `SIZE=${size}`, '--entrypoint', 'node', '--user', 'root', ctx.baseImage, '-e', SITE_BIG)
  const ws = makeGitWorkspace(ctx.root, 'gwi')
  cliSync(ctx.root, ['init', ws])
  const dockerfile = join(ws, '.agent-sandbox', 'Dockerfile')
  const caLine = pem('ca.pem').trim().replace(/\n/g, '\\n')
  writeFileSync(dockerfile, `${sh('cat', [dockerfile]).stdout}\nRUN printf '%b' '${caLine}\\n' > /usr/local/share/ca-certificates/bench.crt && update-ca-certificates\n`)
  // A masked secret declared for the intercepted site: the pass-through site is still not intercepted.
  const config = {dockerNetwork: net, allowDomains: [site, passSite], httpRules: [{host: site, methods: ['GET', 'HEAD']}], secretEnv: [{name: 'BENCH_TOKEN', hosts: [site]}]}
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify(config, null, 2)}\n`)
  cliSync(ctx.root, ['trust', ws, '--yes'])
  cliSync(ctx.root, ['build', ws])
  const name = JSON.parse(cliSync(ctx.root, ['start', ws, '--json'], {BENCH_TOKEN: 'sk-bench-0123456789abcdef'}).stdout).name
  const lookup = (host) => sh('docker', ['exec', '-u', 'node', name, 'sandbox-exec', 'getent', 'ahostsv4', host]).stdout.split(/\s/)[0]
  const address = lookup(site)
  const passAddress = lookup(passSite)
  // The download floor's relay, in the gateway's container (its uid may go out): TLS terminated with the site's own certificate, re-originated verified.
  docker('exec', '-d', '-e', `CERT=${pem('cert.pem')}`, '-e', `KEY=${pem('key.pem')}`, '-e', `CA=${pem('ca.pem')}`, '-e', `SITE=${site}`, '-e', `ADDRESS=${address}`, `${name}-gateway`, 'bash', '-c', 'exec node -e "$0" > /tmp/bench-relay.log 2>&1', RELAY)
  // The pass-through floor's relay, beside it: the TCP bytes to the pass-through site as they are.
  docker('exec', '-d', '-e', `ADDRESS=${passAddress}`, `${name}-gateway`, 'bash', '-c', 'exec node -e "$0" > /tmp/bench-tcp-relay.log 2>&1', TCP_RELAY)
  for (const [port, log] of [[RELAY_PORT, 'bench-relay.log'], [TCP_RELAY_PORT, 'bench-tcp-relay.log']]) {
    const listening = `for i in $(seq 100); do (: < /dev/tcp/127.0.0.1/${port}) 2> /dev/null && exit 0; sleep 0.1; done; cat /tmp/${log} >&2; exit 1`
    docker('exec', `${name}-gateway`, 'bash', '-c', listening)
  }
  ctx.extra.gwi = {net, site, name, address, passSite, passAddress, bytes: String(size * 1024 * 1024)}
}
/** @returns {{net: string, site: string, name: string, address: string, passSite: string, passAddress: string, bytes: string}} */
const gwiOf = (ctx) => /** @type {any} */ (ctx.extra.gwi)
const asAgentIn = (name, ...argv) => dockerStep('exec', '-u', 'node', name, '/usr/local/bin/sandbox-exec', ...argv)
/** The gateway's resident memory (its node process is the container's PID 1), for a row's note. */
function gatewayMemory(ctx) {
  const status = sh('docker', ['exec', `${gwiOf(ctx).name}-gateway`, 'cat', '/proc/1/status']).stdout
  const mib = (key) => `${(Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024).toFixed(1)}`
  return `gateway VmRSS ${mib('VmRSS')} MiB (anonymous ${mib('RssAnon')}, file ${mib('RssFile')}) after the row`
}
const INTERCEPT_ROWS = ['gateway-intercept', 'gateway-download-floor', 'gateway-download', 'gateway-download-passthrough-floor', 'gateway-download-passthrough']
/** The interception rows' tear-down, after the last of them that runs. */
const interceptTeardownAfter = (key) => (ctx) => {
  const selected = /** @type {string[]} */ (ctx.extra.selected ?? [])
  const rest = selected.slice(selected.indexOf(key) + 1)
  if (!rest.some((k) => INTERCEPT_ROWS.includes(k))) interceptTeardown(ctx)
}
function interceptTeardown(ctx) {
  const gwi = gwiOf(ctx)
  if (!gwi) return
  rmSandbox(gwi.name)
  rmForce(gwi.site)
  rmForce(gwi.passSite)
  sh('docker', ['network', 'rm', gwi.net], {allowFailure: true})
  delete ctx.extra.gwi
}

/**
 * A workspace whose trusted config masks one secretEnv (BENCH_TOKEN, for a name of
 * the bench's own): a `run` with the variable set gets its own egress gateway, the
 * same `run` without it has the firewall alone. Same image, same config, both arms.
 */
function gatewayStartSetup(ctx) {
  if (ctx.extra.gws) return
  const ws = makeGitWorkspace(ctx.root, 'gws')
  cliSync(ctx.root, ['init', ws])
  writeFileSync(join(ws, '.agent-sandbox', 'config.json'), `${JSON.stringify({secretEnv: [{name: 'BENCH_TOKEN', hosts: [`asb-bench-${ctx.id}.invalid`]}]}, null, 2)}\n`)
  cliSync(ctx.root, ['trust', ws, '--yes'])
  cliSync(ctx.root, ['build', ws])
  ctx.extra.gws = ws
}
const gwsOf = (ctx) => /** @type {string} */ (ctx.extra.gws)

export const scenarios = [
  {
    key: 'startup',
    cheap: true,
    title: 'CLI start-up',
    ours: '`agent-sandbox --version`',
    base: "`node -e ''` (both without NODE_EXTRA_CA_CERTS)",
    target: 1.5,
    smoke: true,
    a: {steps: (ctx) => [{...cli(ctx, '--version'), env: {...ctx.env, ...noExtraCa}}]},
    b: {steps: () => [{argv: ['node', '-e', ''], env: noExtraCa}]},
  },
  {
    key: 'startup-ca',
    cheap: true,
    title: 'CLI start-up behind a TLS-inspecting proxy',
    ours: '`agent-sandbox --version`',
    base: `\`node -e ''\` (both with NODE_EXTRA_CA_CERTS=${SYSTEM_CA})`,
    target: 1.5,
    smoke: true,
    a: {steps: (ctx) => [{...cli(ctx, '--version'), env: {...ctx.env, NODE_EXTRA_CA_CERTS: SYSTEM_CA}}]},
    b: {steps: () => [{argv: ['node', '-e', ''], env: {NODE_EXTRA_CA_CERTS: SYSTEM_CA}}]},
  },
  {
    key: 'config',
    cheap: true,
    title: 'a command that reads the settings',
    ours: '`agent-sandbox config --json` (the valibot schema, the layered settings, the trust store, hook detection)',
    base: "`node -e ''` (both without NODE_EXTRA_CA_CERTS)",
    target: 1.5,
    smoke: true,
    a: {steps: (ctx) => [{...cli(ctx, 'config', ctx.ws, '--json'), env: {...ctx.env, ...noExtraCa}}]},
    b: {steps: () => [{argv: ['node', '-e', ''], env: noExtraCa}]},
  },
  {
    key: 'exec',
    cheap: true,
    title: 'warm exec',
    ours: '`agent-sandbox exec -- true` (sandbox running)',
    base: '`docker exec <c> true`',
    target: 2.5,
    smoke: true,
    a: {steps: (ctx) => [cli(ctx, 'exec', ctx.ws, '--', 'true')]},
    b: {steps: (ctx) => [dockerStep('exec', ctx.name, 'true')]},
  },
  {
    key: 'commit',
    cheap: true,
    title: '`git commit` inside',
    ours: '`git commit --allow-empty` as the agent in the sandbox (`docker exec -u node <c> sandbox-exec git …`: the wrapper, the sync check, its own git directory with the host\'s objects as alternates, the pinned config)',
    base: 'the same `/usr/bin/git commit` as the owner in a plain container of the same image over the same workspace',
    target: 1.5,
    smoke: true,
    setup: (ctx) => {
      const plain = `asb-bench-${ctx.id}-plaingit`
      rmForce(plain)
      sh('docker', ['run', '-d', '--name', plain, ...label(ctx), '--user', `${OWNER}:${OWNER}`, '--env', 'HOME=/tmp', '--mount', `type=bind,source=${ctx.ws},target=/w`, '--workdir', '/w', '--entrypoint', 'sleep', ctx.image, 'infinity'])
      ctx.extra.plain = plain
    },
    teardown: (ctx) => rmForce(/** @type {string} */ (ctx.extra.plain)),
    a: {steps: (ctx) => [dockerStep('exec', '-u', 'node', ctx.name, '/usr/local/bin/sandbox-exec', 'git', '-c', 'user.name=Bench', '-c', 'user.email=b@example.invalid', 'commit', '-q', '--allow-empty', '-m', 'bench')]},
    b: {steps: (ctx) => [dockerStep('exec', /** @type {string} */ (ctx.extra.plain), '/usr/bin/git', '-c', 'safe.directory=*', '-c', 'user.name=Bench', '-c', 'user.email=b@example.invalid', 'commit', '-q', '--allow-empty', '-m', 'bench')]},
  },
  {
    key: 'hook-detect',
    cheap: true,
    title: 'hook-framework detection at `start`',
    ours: 'import `hook-config.js` and detect over a repository with every framework (husky 9, lefthook, pre-commit, overcommit, lint-staged, commitlint, simple-git-hooks, a sourced helper)',
    base: 'the same over a repository with none (an empty directory)',
    targetDiffMs: 20,
    smoke: true,
    setup: (ctx) => {
      ctx.extra.every = everyFrameworkRepo(join(ctx.root, 'hooks-every'))
      mkdirSync(join(ctx.root, 'hooks-none'), {recursive: true})
    },
    a: {steps: (ctx) => [detectStep(/** @type {string} */ (ctx.extra.every))]},
    b: {steps: (ctx) => [detectStep(join(ctx.root, 'hooks-none'))]},
  },
  {
    key: 'shell',
    title: 'warm shell to prompt',
    ours: '`agent-sandbox shell` (pty; `exit` at the first prompt)',
    base: '`docker exec -it -u node <c> bash -l` (same shell, same pty driver)',
    target: 2.5,
    smoke: true,
    a: {steps: (ctx) => [{...cli(ctx, 'shell', ctx.ws), pty: true, timeoutMs: 60_000}]},
    b: {steps: (ctx) => [{argv: ['docker', 'exec', '-it', '-u', 'node', ctx.name, 'bash', '-l'], pty: true, timeoutMs: 60_000}]},
  },
  {
    key: 'cold',
    title: 'cold start, firewall included',
    ours: '`agent-sandbox start` (image present, no container) until ready',
    base: '`docker run -d --entrypoint sleep <img> infinity` then `docker exec <c> true`',
    target: 3,
    smoke: true,
    // A cold start makes the push gate too: neither exists before.
    a: {before: (ctx) => rmSandbox(ctx.name), steps: (ctx) => [cli(ctx, 'start', ctx.ws)], after: (ctx) => rmSandbox(ctx.name)},
    b: {
      before: (ctx) => rmForce(`asb-bench-${ctx.id}-cold`),
      steps: (ctx) => [
        dockerStep('run', '-d', '--name', `asb-bench-${ctx.id}-cold`, ...label(ctx), '--entrypoint', 'sleep', ctx.image, 'infinity'),
        dockerStep('exec', `asb-bench-${ctx.id}-cold`, 'true'),
      ],
      after: (ctx) => rmForce(`asb-bench-${ctx.id}-cold`),
    },
    teardown: (ctx) => {
      cliSync(ctx.root, ['start', ctx.ws])
    },
  },
  {
    key: 'stop',
    title: 'stop a running sandbox',
    ours: '`agent-sandbox stop` (the sandbox, its push gate and its egress gateway)',
    base: '`docker stop <c>` of the same sandbox',
    target: 1.3,
    smoke: true,
    runs: 5,
    a: {before: (ctx) => cliSync(ctx.root, ['start', ctx.ws]), steps: (ctx) => [cli(ctx, 'stop', ctx.ws)]},
    b: {before: (ctx) => cliSync(ctx.root, ['start', ctx.ws]), steps: (ctx) => [dockerStep('stop', ctx.name)]},
    teardown: (ctx) => {
      cliSync(ctx.root, ['start', ctx.ws])
    },
  },
  {
    // Where stop's time goes: the same three containers stopped by the docker CLI at once.
    key: 'stop-all',
    title: 'stop: the same three containers (no target)',
    ours: '`agent-sandbox stop`',
    base: '`docker stop <c> <c>-gate <c>-gateway` (the engine work `stop` asks for)',
    smoke: false,
    runs: 5,
    a: {before: (ctx) => cliSync(ctx.root, ['start', ctx.ws]), steps: (ctx) => [cli(ctx, 'stop', ctx.ws)]},
    b: {before: (ctx) => cliSync(ctx.root, ['start', ctx.ws]), steps: (ctx) => [dockerStep('stop', ctx.name, `${ctx.name}-gate`, `${ctx.name}-gateway`)]},
    teardown: (ctx) => {
      cliSync(ctx.root, ['start', ctx.ws])
    },
  },
  {
    // What the engine's own restart of a sandbox costs the user: the next command repairs it (its push
    // gate and egress gateway made anew in the new namespace), where no restart policy follows it.
    key: 'heal',
    title: 'the next command after the engine restarted the sandbox (no target)',
    ours: '`agent-sandbox exec -- true` after `docker restart <c>` (the gate and the gateway repaired on the way in)',
    base: '`agent-sandbox start` of the same sandbox stopped (the three containers started until ready)',
    smoke: false,
    runs: 5,
    a: {before: (ctx) => sh('docker', ['restart', ctx.name]), steps: (ctx) => [cli(ctx, 'exec', ctx.ws, '--', 'true')]},
    b: {before: (ctx) => cliSync(ctx.root, ['stop', ctx.ws]), steps: (ctx) => [cli(ctx, 'start', ctx.ws)]},
    teardown: (ctx) => {
      cliSync(ctx.root, ['start', ctx.ws])
    },
  },
  {
    key: 'firewall',
    title: 'firewall set-up inside a cold start',
    ours: '`agent-sandbox start --network firewall`',
    base: '`agent-sandbox start --network open` (same image)',
    targetDiffMs: 1000,
    smoke: false,
    a: {before: (ctx) => rmSandbox(ctx.name), steps: (ctx) => [cli(ctx, 'start', ctx.ws, '--network', 'firewall')], after: (ctx) => rmSandbox(ctx.name)},
    b: {before: (ctx) => rmSandbox(ctx.name), steps: (ctx) => [cli(ctx, 'start', ctx.ws, '--network', 'open')], after: (ctx) => rmSandbox(ctx.name)},
    teardown: (ctx) => {
      cliSync(ctx.root, ['start', ctx.ws])
    },
  },
  {
    key: 'rebuild',
    cheap: true,
    title: 'no-op rebuild',
    ours: '`agent-sandbox build` (nothing changed)',
    base: '`docker build` of the same context, arguments and labels',
    target: 1.3,
    smoke: true,
    a: {steps: (ctx) => [cli(ctx, 'build', ctx.ws)]},
    b: {
      steps: (ctx) => {
        const dir = join(ctx.ws, '.agent-sandbox')
        return [
          dockerStep(
            'build', '--tag', `asb-bench-${ctx.id}-build:latest`, '--build-arg', `BASE_IMAGE_TAG=${BASE_TAG}`,
            '--label', 'dev.agent-sandbox.managed=true', '--label', 'dev.agent-sandbox.kind=repo', '--label', `dev.agent-sandbox.workspace=${ctx.ws}`,
            '--file', join(dir, 'Dockerfile'), dir,
          ),
        ]
      },
    },
  },
  {
    key: 'provision',
    title: 'first branch provision',
    ours: '`agent-sandbox checkout b1` (no repo-shelf yet)',
    base: '`git clone --no-checkout` + `git worktree add` in a plain container over the same mounts',
    target: 1.5,
    smoke: true,
    runs: 5,
    // Every run gets its own copy of the repository (hard links) and so its own
    // new shelf volume, in both arms; nothing is deleted until the end. Deleting
    // 20k files here makes file creation slow for tens of seconds after.
    a: {before: (ctx) => freshCopy(ctx), steps: (ctx) => [cli(ctx, 'checkout', 'b1', current(ctx))]},
    b: {
      before: (ctx) => {
        freshCopy(ctx)
        docker('volume', 'create', ...label(ctx), `asb-bench-${ctx.id}-shelf-${String(ctx.extra.copies)}`)
      },
      steps: (ctx) => [plainProvision(ctx, `asb-bench-${ctx.id}-shelf-${String(ctx.extra.copies)}`, current(ctx))],
    },
  },
  {
    key: 'repeat',
    title: 'repeat provision (already there)',
    ours: '`agent-sandbox checkout b1` (worktree exists)',
    base: '`docker run --rm --entrypoint true <base img>`',
    target: 2,
    smoke: true,
    setup: (ctx) => {
      ctx.big ??= copyRepo(/** @type {string} */ (ctx.repoCache), join(ctx.root, 'big', 'bigrepo'))
      cliSync(ctx.root, ['checkout', 'b1', ctx.big])
    },
    a: {steps: (ctx) => [cli(ctx, 'checkout', 'b1', /** @type {string} */ (ctx.big))]},
    b: {steps: (ctx) => [dockerStep('run', '--rm', ...label(ctx), '--entrypoint', 'true', ctx.baseImage)]},
  },
  {
    key: 'list',
    cheap: true,
    title: 'list sandboxes',
    ours: '`agent-sandbox list --json`',
    base: '`docker ps -a --filter label=dev.agent-sandbox.managed=true --filter label=dev.agent-sandbox.kind=sandbox`',
    target: 2,
    smoke: true,
    setup: (ctx) => {
      // Sandboxes as `start` labels them (created, not running): list reads labels and state only.
      for (let i = 0; i < ctx.listCount; i++) {
        const path = join(ctx.root, 'list', `ws-${String(i).padStart(2, '0')}`)
        docker(
          'create', '--name', `asb-bench-${ctx.id}-list-${i}`, ...label(ctx),
          ...Object.entries({
            'dev.agent-sandbox.managed': 'true', 'dev.agent-sandbox.kind': 'sandbox', 'dev.agent-sandbox.workspace': path,
            'dev.agent-sandbox.repo': `ws-${i}`, 'dev.agent-sandbox.mode': i % 3 ? 'bind' : 'branch', 'dev.agent-sandbox.branch': i % 3 ? '' : `feat-${i}`,
            'dev.agent-sandbox.network': 'firewall', 'dev.agent-sandbox.limits': '{}', 'dev.agent-sandbox.workdir': `/workspace/ws-${i}`,
          }).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
          '--entrypoint', 'true', ctx.baseImage,
        )
      }
      const listed = JSON.parse(cliSync(ctx.root, ['list', '--json']).stdout)
      ctx.extra.listed = listed.length
    },
    note: (ctx) => `${String(ctx.extra.listed)} sandboxes listed (${ctx.listCount} made by the bench, the rest already on the engine)`,
    a: {steps: (ctx) => [cli(ctx, 'list', '--json')]},
    b: {steps: () => [dockerStep(...psSandboxes)]},
  },
  {
    key: 'watch',
    cheap: true,
    title: 'watch: start to first frame',
    ours: "`agent-sandbox watch` in a 160 × 40 pty (util-linux `script`): the time until its first frame holds the engine's sandboxes (then `q` ends it)",
    base: '`agent-sandbox list --json`, the same engine call',
    target: 2,
    smoke: true,
    // `script`'s pty has no size: stty gives it one (the sh and stty cost about 2 ms of the row).
    a: {
      steps: (ctx) => [{argv: ['sh', '-c', 'stty rows 40 cols 160 && exec "$@"', 'sh', ...cliArgv('watch')], env: ctx.env, pty: true, answer: {when: /SANDBOX +REPO/, send: 'q', timed: true}, timeoutMs: 60_000}],
      // The engine finishes what a watch that quit left it (Docker's stats wait a second for a second sample) before the next run.
      after: () => sh('sleep', ['2']),
    },
    b: {steps: (ctx) => [cli(ctx, 'list', '--json')]},
  },
  {
    // The code cache's worth (bin/compile-cache.cjs), measured where it matters most: the fastest command.
    key: 'list-nocache',
    cheap: true,
    title: 'list without the code cache (no target)',
    ours: '`agent-sandbox list --json` with `NODE_DISABLE_COMPILE_CACHE=1` (the bundles compiled from source)',
    base: '`agent-sandbox list --json` through the code cache, as users run it',
    smoke: false,
    a: {steps: (ctx) => [{...cli(ctx, 'list', '--json'), env: {...ctx.env, NODE_DISABLE_COMPILE_CACHE: '1'}}]},
    b: {steps: (ctx) => [cli(ctx, 'list', '--json')]},
  },
  {
    // Where stop's floor is: a node program that makes only the one stop call.
    key: 'stop-floor',
    title: 'floor: any node program stopping the sandbox (no target)',
    ours: '`node bench/floor-stop.cjs <c>`: start node, make the one Engine API stop call, exit (no NODE_EXTRA_CA_CERTS)',
    base: '`docker stop <c>` of the same sandbox',
    smoke: false,
    runs: 5,
    a: {before: (ctx) => cliSync(ctx.root, ['start', ctx.ws]), steps: (ctx) => [{argv: ['node', join(REPO, 'bench', 'floor-stop.cjs'), ctx.name], env: noExtraCa}]},
    b: {before: (ctx) => cliSync(ctx.root, ['start', ctx.ws]), steps: (ctx) => [dockerStep('stop', ctx.name)]},
  },
  {
    key: 'list-floor',
    cheap: true,
    title: 'floor: any node program listing (no target)',
    ours: '`node bench/floor-list.cjs`: start node, make the same one Engine API call, print the answer (no NODE_EXTRA_CA_CERTS)',
    base: 'the same `docker ps` as the list row',
    smoke: false,
    a: {steps: () => [{argv: ['node', join(REPO, 'bench', 'floor-list.cjs')], env: noExtraCa}]},
    b: {steps: () => [dockerStep(...psSandboxes)]},
  },
  {
    key: 'gateway',
    title: '200 sequential HTTPS GETs to a local test site through the egress gateway',
    ours: 'curl ×200 as the agent in the sandbox (redirected to the gateway: SNI check, its own DNS query, TLS passed through)',
    base: 'the same curl ×200 from the gateway container itself (its uid goes out direct: the firewall alone)',
    target: 1.3,
    smoke: true,
    runs: 5,
    setup: gatewaySetup,
    teardown: gatewayTeardown,
    a: {steps: (ctx) => [dockerStep('exec', '-u', 'node', extra(ctx, 'gwSandbox'), '/usr/local/bin/sandbox-exec', 'bash', '-c', GETS, ...getsArgs(ctx))]},
    b: {steps: (ctx) => [dockerStep('exec', `${extra(ctx, 'gwSandbox')}-gateway`, 'bash', '-c', GETS, ...getsArgs(ctx))]},
  },
  {
    key: 'pending',
    title: 'from a blocked request to its pending approval',
    ours: 'a request refused by the gateway (curl as the agent, a name not allowlisted), then `agent-sandbox firewall pending --json` (which lists it)',
    base: 'the same refused request, then `docker exec <c>-gateway tail -n 50` of the request log the queue is derived from',
    targetDiffMs: 300,
    smoke: true,
    runs: 5,
    setup: gatewaySetup,
    teardown: gatewayTeardown,
    a: {steps: (ctx) => [blockedRequest(ctx), cli(ctx, 'firewall', 'pending', extra(ctx, 'gwWs'), '--json')]},
    b: {steps: (ctx) => [blockedRequest(ctx), dockerStep('exec', `${extra(ctx, 'gwSandbox')}-gateway`, 'tail', '-n', '50', '/tmp/requests.jsonl')]},
  },
  {
    key: 'gateway-intercept',
    title: '200 sequential HTTPS GETs to a local test site intercepted by the egress gateway',
    ours: 'curl ×200 as the agent (verified; HTTP/2 offered): the gateway terminates TLS with the sandbox CA, checks the rules, re-originates verified TLS (HTTP/1.1, keep-alive)',
    base: 'the same curl ×200 from the gateway container itself (its uid goes out direct: the firewall alone)',
    target: 1.3,
    smoke: true,
    runs: 5,
    setup: interceptSetup,
    teardown: interceptTeardownAfter('gateway-intercept'),
    a: {steps: (ctx) => [asAgentIn(gwiOf(ctx).name, 'bash', '-c', GETS_VERIFIED, gwiOf(ctx).site, gwiOf(ctx).address, ctx.smoke ? '20' : '200')]},
    b: {steps: (ctx) => [dockerStep('exec', `${gwiOf(ctx).name}-gateway`, 'bash', '-c', GETS_VERIFIED, gwiOf(ctx).site, gwiOf(ctx).address, ctx.smoke ? '20' : '200')]},
    note: gatewayMemory,
  },
  {
    key: 'gateway-download-floor',
    title: 'floor: a 200 MiB download through any node program that terminates TLS (no target)',
    ours: 'curl from the gateway container through a bare node TLS relay beside it (decrypt, encrypt again, no HTTP; node\'s default flags)',
    base: 'the same curl from the gateway container straight to the site (the download row\'s baseline)',
    smoke: false,
    runs: 5,
    setup: interceptSetup,
    teardown: interceptTeardownAfter('gateway-download-floor'),
    a: {steps: (ctx) => [dockerStep('exec', `${gwiOf(ctx).name}-gateway`, 'bash', '-c', DOWNLOAD_VIA_RELAY, gwiOf(ctx).site, gwiOf(ctx).bytes, String(RELAY_PORT))]},
    b: {steps: (ctx) => [dockerStep('exec', `${gwiOf(ctx).name}-gateway`, 'bash', '-c', DOWNLOAD, gwiOf(ctx).site, gwiOf(ctx).address, gwiOf(ctx).bytes)]},
  },
  {
    key: 'gateway-download',
    title: 'a 200 MiB HTTPS download from a local test site intercepted by the egress gateway, against the floor',
    ours: 'curl as the agent (HTTP/2 to the gateway, HTTP/1.1 from it to the site)',
    base: 'the same curl from the gateway container through the floor row\'s bare node TLS relay (decrypt, encrypt again); target 2×',
    target: 2,
    smoke: true,
    runs: 5,
    setup: interceptSetup,
    teardown: interceptTeardownAfter('gateway-download'),
    a: {steps: (ctx) => [asAgentIn(gwiOf(ctx).name, 'bash', '-c', DOWNLOAD, gwiOf(ctx).site, gwiOf(ctx).address, gwiOf(ctx).bytes)]},
    b: {steps: (ctx) => [dockerStep('exec', `${gwiOf(ctx).name}-gateway`, 'bash', '-c', DOWNLOAD_VIA_RELAY, gwiOf(ctx).site, gwiOf(ctx).bytes, String(RELAY_PORT))]},
    note: gatewayMemory,
  },
  {
    key: 'gateway-download-passthrough-floor',
    title: 'floor: a 200 MiB download through any node program that relays the TCP bytes (no target)',
    ours: 'curl from the gateway container through a bare node TCP relay beside it (the bytes both ways as they are; node\'s default flags)',
    base: 'the same curl from the gateway container straight to the site (the pass-through row\'s baseline)',
    smoke: false,
    runs: 5,
    setup: interceptSetup,
    teardown: interceptTeardownAfter('gateway-download-passthrough-floor'),
    a: {steps: (ctx) => [dockerStep('exec', `${gwiOf(ctx).name}-gateway`, 'bash', '-c', DOWNLOAD_VIA_RELAY, gwiOf(ctx).passSite, gwiOf(ctx).bytes, String(TCP_RELAY_PORT))]},
    b: {steps: (ctx) => [dockerStep('exec', `${gwiOf(ctx).name}-gateway`, 'bash', '-c', DOWNLOAD, gwiOf(ctx).passSite, gwiOf(ctx).passAddress, gwiOf(ctx).bytes)]},
  },
  {
    key: 'gateway-download-passthrough',
    title: 'a 200 MiB HTTPS download from an allowlisted host that is not intercepted, while a masked secret exists for another host',
    ours: 'curl as the agent (the gateway reads the SNI, then passes the TLS bytes through)',
    base: 'the same curl from the gateway container itself (the firewall alone); target 1.15×',
    target: 1.15,
    smoke: true,
    runs: 5,
    setup: interceptSetup,
    teardown: interceptTeardownAfter('gateway-download-passthrough'),
    a: {steps: (ctx) => [asAgentIn(gwiOf(ctx).name, 'bash', '-c', DOWNLOAD, gwiOf(ctx).passSite, gwiOf(ctx).passAddress, gwiOf(ctx).bytes)]},
    b: {steps: (ctx) => [dockerStep('exec', `${gwiOf(ctx).name}-gateway`, 'bash', '-c', DOWNLOAD, gwiOf(ctx).passSite, gwiOf(ctx).passAddress, gwiOf(ctx).bytes)]},
    note: gatewayMemory,
  },
  {
    key: 'gateway-start',
    title: 'cold start with the egress gateway',
    ours: '`agent-sandbox run -- true` with a masked secret set (its own gateway: created in the namespace, CA and secrets handed over, ready before the command)',
    base: 'the same `agent-sandbox run -- true` with the secret unset (no gateway: the firewall alone)',
    targetDiffMs: 300,
    smoke: false,
    setup: gatewayStartSetup,
    a: {steps: (ctx) => [{argv: cliArgv('run', gwsOf(ctx), '--', 'true'), env: {...ctx.env, BENCH_TOKEN: 'sk-bench-0123456789abcdef'}}]},
    b: {steps: (ctx) => [cli(ctx, 'run', gwsOf(ctx), '--', 'true')]},
  },
  {
    key: 'parallel',
    title: 'parallel one-shot runs',
    ours: '`agent-sandbox run -- true` ×N at once (wall time for all)',
    base: '`docker run --rm --entrypoint true <img>` ×N at once',
    target: 2,
    smoke: true,
    a: {parallel: true, steps: (ctx) => Array.from({length: ctx.parallel}, () => cli(ctx, 'run', ctx.ws, '--', 'true'))},
    b: {parallel: true, steps: (ctx) => Array.from({length: ctx.parallel}, () => dockerStep('run', '--rm', ...label(ctx), '--entrypoint', 'true', ctx.image))},
  },
  {
    // A one-shot run with the firewall is two containers (the run's own and its egress gateway's).
    key: 'parallel-floor',
    title: 'floor: two containers per one-shot run, by the docker CLI (no target)',
    ours: '`docker run --rm --entrypoint true <img>` ×2N at once',
    base: '`docker run --rm --entrypoint true <img>` ×N at once',
    smoke: false,
    a: {parallel: true, steps: (ctx) => Array.from({length: 2 * ctx.parallel}, () => dockerStep('run', '--rm', ...label(ctx), '--entrypoint', 'true', ctx.image))},
    b: {parallel: true, steps: (ctx) => Array.from({length: ctx.parallel}, () => dockerStep('run', '--rm', ...label(ctx), '--entrypoint', 'true', ctx.image))},
  },
  {
    key: 'parallel-none',
    title: 'parallel one-shot runs without the firewall (no target)',
    ours: '`agent-sandbox run --network none -- true` ×N at once',
    base: '`docker run --rm --entrypoint true <img>` ×N at once',
    smoke: false,
    a: {parallel: true, steps: (ctx) => Array.from({length: ctx.parallel}, () => cli(ctx, 'run', ctx.ws, '--network', 'none', '--', 'true'))},
    b: {parallel: true, steps: (ctx) => Array.from({length: ctx.parallel}, () => dockerStep('run', '--rm', ...label(ctx), '--entrypoint', 'true', ctx.image))},
  },
  {
    key: 'nested-run',
    title: 'a nested container',
    ours: '`docker run --rm <img> true` as the agent inside a `--nested` sandbox (`docker exec -u node <c> sandbox-exec docker run …`: rootless Podman, crun, pasta, overlay in a user namespace)',
    base: '`docker run --rm <img> true` of the same image on the host',
    target: 3,
    smoke: false,
    setup: nestedSetup,
    a: {steps: (ctx) => [asAgent(ctx, 'docker', 'run', '--rm', nestedOf(ctx).inside, '/usr/bin/true')]},
    b: {steps: (ctx) => [dockerStep('run', '--rm', ...label(ctx), nestedOf(ctx).host, '/usr/bin/true')]},
  },
  {
    key: 'nested-build',
    title: 'a nested 3-step build',
    ours: '`docker build --no-cache` of a RUN, COPY, RUN Dockerfile in the workspace, as the agent inside a `--nested` sandbox',
    base: 'the same build of the same directory on the host (the engine\'s own builder)',
    target: 2,
    smoke: false,
    setup: nestedSetup,
    a: {steps: (ctx) => [asAgent(ctx, 'docker', 'build', '--no-cache', '-q', '--build-arg', `BASE=${nestedOf(ctx).inside}`, '-t', 'localhost/bench-built:1', nestedOf(ctx).insideDir)]},
    b: {
      steps: (ctx) => [dockerStep('build', '--no-cache', '-q', ...label(ctx), '--build-arg', `BASE=${nestedOf(ctx).host}`, '-t', `asb-bench-${ctx.id}-built:1`, nestedOf(ctx).dir)],
      // Each build's image, with its intermediate ones: a tag moved to the next build would leave them dangling.
      after: (ctx) => sh('docker', ['rmi', `asb-bench-${ctx.id}-built:1`], {allowFailure: true}),
    },
  },
]
