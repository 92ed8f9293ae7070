/** Where the gateway listens in the sandbox's network namespace, and its own state (a tmpfs of the gateway container). */
export const GATEWAY_DEFAULTS = {
  httpPort: 19080,
  tlsPort: 19443,
  // A tmpfs the gateway container mounts; /tmp because Docker applies a tmpfs's mode only where the image has the directory.
  stateDir: '/tmp',
  /** The bundled program in the base image (scripts/bundle-cli.mjs, base-image/Dockerfile). */
  program: '/usr/local/lib/agent-sandbox/egress-gateway.cjs',
  /**
   * node's flags for the gateway (docs/decisions/0112): a 1 MiB young generation (V8's grows to 16 MiB a
   * half and stays there) and V8's size-over-speed heuristics; the optimising compiler stays on, for the
   * JavaScript of each intercepted chunk (about a quarter less CPU per byte, for about 15 MiB more resident).
   */
  nodeFlags: ['--max-semi-space-size=1', '--optimize-for-size'],
} as const

/** What the CLI hands over on an exec's stdin (gateway-container.ts startGatewayContainer; gateway.ts --secret replaces one value), kept in the gateway's tmpfs only. */
export const SECRETS_FILE = 'secrets.json'

/**
 * The gateway's program as a command, with `args` after it: in its container
 * (spec-companions.ts buildGatewaySpec) and in the execs that talk to it (firewall allow,
 * its rules, the App token). With `snapshot` (the default) node-boot
 * (base-image/node-boot.sh) starts node from the image's snapshot of node's
 * bootstrap, made with these very flags, where the image has it (an image from
 * an older base starts node plainly): about 0.2 s less per start, for ~2.5 MiB
 * more resident memory (node keeps the snapshot's bytes). So it is for what
 * someone waits for and what lives briefly (a run's gateway, the execs); a
 * sandbox's gateway, which lives as long as the sandbox, starts plainly
 * (docs/PERFORMANCE.md).
 */
export function gatewayCommand(args: readonly string[] = [], options: {snapshot?: boolean} = {}): string[] {
  const node = [...GATEWAY_DEFAULTS.nodeFlags, GATEWAY_DEFAULTS.program, ...args]
  return options.snapshot === false ? ['/usr/bin/node', ...node] : ['/bin/sh', '-c', GATEWAY_LAUNCH, 'egress-gateway', ...node]
}
const GATEWAY_LAUNCH = '[ -x /usr/local/bin/node-boot ] && exec /usr/local/bin/node-boot "$@"; exec /usr/bin/node "$@"'
