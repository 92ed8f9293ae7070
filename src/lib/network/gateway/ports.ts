/** Where the gateway listens in the sandbox's network namespace, and its own state (a tmpfs of the gateway container). */
export const GATEWAY_DEFAULTS = {
  httpPort: 19080,
  tlsPort: 19443,
  // A tmpfs the gateway container mounts; /tmp because Docker applies a tmpfs's mode only where the image has the directory.
  stateDir: '/tmp',
  /** The bundled program in the base image (scripts/bundle-cli.mjs, base-image/Dockerfile). */
  program: '/usr/local/lib/agent-sandbox/egress-gateway.cjs',
} as const

/** What the CLI hands over on an exec's stdin (lifecycle.ts startGateway, or gateway.ts --secrets), kept in the gateway's tmpfs only. */
export const SECRETS_FILE = 'secrets.json'
