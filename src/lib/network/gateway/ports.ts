/** Where the gateway listens in the sandbox's network namespace, and its own state (a tmpfs of the gateway container). */
export const GATEWAY_DEFAULTS = {
  httpPort: 19080,
  tlsPort: 19443,
  // A tmpfs the gateway container mounts; /tmp because Docker applies a tmpfs's mode only where the image has the directory.
  stateDir: '/tmp',
  /** The bundled program in the base image (scripts/bundle-cli.mjs, base-image/Dockerfile). */
  program: '/usr/local/lib/agent-sandbox/egress-gateway.cjs',
  /**
   * node's flags for the gateway (docs/PERFORMANCE.md, the gateway's memory): a
   * 1 MiB young generation (V8's grows to 16 MiB a half and stays there), and no
   * optimising compiler (TurboFan's code and compile zones for a program whose
   * work is in OpenSSL, nghttp2 and llhttp; the baseline compiler stays).
   */
  nodeFlags: ['--max-semi-space-size=1', '--no-opt', '--optimize-for-size'],
} as const

/** What the CLI hands over on an exec's stdin (lifecycle.ts startGateway; gateway.ts --secret replaces one value), kept in the gateway's tmpfs only. */
export const SECRETS_FILE = 'secrets.json'

/**
 * The gateway's program as a command, with `args` after it: in its container
 * (spec.ts buildGatewaySpec) and in the execs that talk to it (firewall allow,
 * its rules, the App token). node-boot (base-image/node-boot.sh) starts node
 * from the image's snapshot of node's bootstrap, made with these very flags;
 * an image from before node-boot starts node plainly.
 */
export function gatewayCommand(...args: string[]): string[] {
  return ['/bin/sh', '-c', GATEWAY_LAUNCH, 'egress-gateway', ...GATEWAY_DEFAULTS.nodeFlags, GATEWAY_DEFAULTS.program, ...args]
}
const GATEWAY_LAUNCH = '[ -x /usr/local/bin/node-boot ] && exec /usr/local/bin/node-boot "$@"; exec /usr/bin/node "$@"'
