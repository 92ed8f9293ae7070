/**
 * The contract between the CLI and the image: the in-container paths, the
 * user and the ports that the image's scripts (base-image/) use as well. A
 * change here is a change there. It imports nothing, so any area may read it.
 */
export const STATE_DIR = '/run/agent-sandbox'
/** Debian's system bundle, which the image's NODE_EXTRA_CA_CERTS names (base-image/Dockerfile). */
export const SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'
export const SANDBOX_USER = 'node'
/** Every agent process goes through it: it waits for the firewall and set-up (docs/design.md). */
export const SANDBOX_EXEC = '/usr/local/bin/sandbox-exec'
export const SHELF_MOUNT = '/repo-shelf'
/** Where a bind-mode sandbox sees the host's .git (read-only): the alternate of its own git directory. */
export const HOST_GIT_MOUNT = '/host-git'
/** The push gate's port on the sandbox's loopback (git-gate.sh), and the URL of the remote `host`. */
export const GATE_PORT = 19418
export const GATE_URL = `git://127.0.0.1:${GATE_PORT}/ws/.git`

/** Nested containers (nestedContainers): the Podman storage volume, the socket DOCKER_HOST names, the devices `node` gets. */
export const NESTED_STORE = '/home/node/.local/share/containers'
export const NESTED_DOCKER_HOST = `unix://${STATE_DIR}/podman/podman.sock`
export const NESTED_DEVICES = ['/dev/fuse', '/dev/net/tun']
/** git's askpass helper for the GitHub App token (git-askpass-ghapp.sh). */
export const GHAPP_ASKPASS = '/usr/local/bin/git-askpass-ghapp'
/** The push gate's program (git-gate.sh), the entrypoint of its container. */
export const GATE_ENTRYPOINT = '/usr/local/sbin/git-gate'
