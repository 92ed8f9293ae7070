#!/usr/bin/env bash
# setup-rootless-podman.sh: a rootless Podman engine, served by a dedicated user, for tests.
#
# For CI and test machines (Debian, run as root, after setup-engine.sh, so that Docker
# holds agent-sandbox-base:latest and debian:trixie-slim). Idempotent, quiet unless
# something fails. It:
#   - creates the system user asbx-rootless (home /home/asbx-rootless) and gives it
#     65536 subordinate uids and gids above every range in use;
#   - installs podman, uidmap (newuidmap), slirp4netns and fuse-overlayfs;
#   - makes /dev/net/tun and /dev/fuse usable by users (0666, Debian's own default;
#     some VMs create them 0600): slirp4netns and fuse-overlayfs open them;
#   - stores images with overlay through fuse-overlayfs: the sandbox runs with
#     `--userns keep-id`, and native rootless overlay then makes a chowned copy of
#     each image on its first container (about 15 s and 2 GB for the base image);
#   - creates its XDG_RUNTIME_DIR /run/user/<uid> (there is no logind here) and starts
#     `podman system service` as that user on /run/user/<uid>/podman/podman.sock
#     (pid in /run/user/<uid>/podman-service.pid), unless the socket already answers;
#   - loads the two images from Docker into the user's storage when missing or stale.
# Prints the socket path on stdout, then "setup-rootless-podman: ready" on stderr.
# Usage: scripts/setup-rootless-podman.sh
# Run the CLI as that user with:
#   runuser -u asbx-rootless -- env HOME=/home/asbx-rootless XDG_RUNTIME_DIR=/run/user/<uid> \
#     DOCKER_HOST=unix:///run/user/<uid>/podman/podman.sock bin/agent-sandbox …
# Env: AGENT_SANDBOX_CI_STATE (default /tmp/agent-sandbox-ci): where the service's log goes.
set -euo pipefail

USER_NAME=asbx-rootless
USER_HOME="/home/$USER_NAME"
IMAGES=(agent-sandbox-base:latest debian:trixie-slim)
RANGE=65536
STATE_DIR="${AGENT_SANDBOX_CI_STATE:-/tmp/agent-sandbox-ci}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'setup-rootless-podman: %s\n' "$*" >&2; }
abort() { printf 'setup-rootless-podman: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || abort "run as root: it creates a user and starts a service as that user"
mkdir -p "$STATE_DIR"

# shellcheck source=scripts/lib.sh
. "$REPO_ROOT/scripts/lib.sh"
apt_install podman uidmap slirp4netns fuse-overlayfs curl

# Away from the uids the base image gives its own users (dnsmasq 999, node 1000):
# on rootful engines those are host uids too, and must not be this user's.
if ! id "$USER_NAME" >/dev/null 2>&1; then
  useradd --system --create-home --home-dir "$USER_HOME" --shell /bin/bash \
    -K SYS_UID_MAX=899 -K SYS_GID_MAX=899 --comment 'agent-sandbox rootless Podman' "$USER_NAME" \
    || abort "cannot create user $USER_NAME"
fi
uid="$(id -u "$USER_NAME")"
runtime_dir="/run/user/$uid"
sock="$runtime_dir/podman/podman.sock"

# next_start FILE: the first id above every range in FILE (at least 100000).
next_start() {
  awk -F: -v min=100000 '$3 > 0 && $2 + $3 > min { min = $2 + $3 } END { print min }' "$1"
}
ranges_added=0
if ! grep -q "^$USER_NAME:" /etc/subuid 2>/dev/null; then
  start="$(next_start /etc/subuid)"
  usermod --add-subuids "$start-$((start + RANGE - 1))" "$USER_NAME"
  ranges_added=1
fi
if ! grep -q "^$USER_NAME:" /etc/subgid 2>/dev/null; then
  start="$(next_start /etc/subgid)"
  usermod --add-subgids "$start-$((start + RANGE - 1))" "$USER_NAME"
  ranges_added=1
fi

for dev in /dev/net/tun /dev/fuse; do
  [ -c "$dev" ] || abort "$dev is missing (rootless networking and fuse-overlayfs need it)"
  [ "$(stat -c %a "$dev")" = 666 ] || chmod 0666 "$dev"
done

# `podman system service` does not create the socket's directory.
install -d -m 0700 -o "$USER_NAME" -g "$(id -g "$USER_NAME")" "$runtime_dir" "$runtime_dir/podman"

# as_user CMD...: run CMD as the user, in its home, with its runtime directory.
as_user() {
  (cd "$USER_HOME" && runuser -u "$USER_NAME" -- env HOME="$USER_HOME" XDG_RUNTIME_DIR="$runtime_dir" \
    PATH=/usr/local/bin:/usr/bin:/bin "$@")
}

as_user unshare --user --map-root-user true 2>/dev/null \
  || abort "user namespaces are not available to $USER_NAME (check user.max_user_namespaces)"
as_user test -r "$REPO_ROOT/package.json" \
  || abort "$USER_NAME cannot read $REPO_ROOT: make it and its parent directories world-readable"

ping_ok() { curl -fsS --max-time 2 --unix-socket "$sock" http://d/_ping >/dev/null 2>&1; }

pid_file="$runtime_dir/podman-service.pid"
stop_service() {
  if [ -f "$pid_file" ]; then
    kill "$(cat "$pid_file")" 2>/dev/null || true
    rm -f "$pid_file"
  fi
  for _ in $(seq 1 20); do
    ping_ok || return 0
    sleep 0.25
  done
  abort "the podman service on $sock did not stop"
}

conf_dir="$USER_HOME/.config/containers"
storage_conf="$conf_dir/storage.conf"
wanted_storage='[storage]
driver = "overlay"

[storage.options.overlay]
mount_program = "/usr/bin/fuse-overlayfs"'
if [ "$(cat "$storage_conf" 2>/dev/null)" != "$wanted_storage" ]; then
  stop_service
  # Storage made with another driver cannot be reused: empty it before the switch.
  as_user podman system reset --force >/dev/null 2>&1 || abort "podman system reset failed for $USER_NAME"
  as_user mkdir -p "$conf_dir"
  printf '%s\n' "$wanted_storage" | as_user tee "$storage_conf" >/dev/null
elif [ "$ranges_added" = 1 ]; then
  stop_service
  as_user podman system migrate >/dev/null 2>&1 || abort "podman system migrate failed for $USER_NAME"
fi

if ! ping_ok; then
  log="$STATE_DIR/rootless-podman.log"
  # shellcheck disable=SC2016 # expanded by that shell
  as_user setsid sh -c 'echo "$$" >"$1"; exec podman system service --time=0 "$2"' sh "$pid_file" "unix://$sock" \
    >>"$log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    ping_ok && break
    sleep 0.5
  done
  ping_ok || abort "podman system service did not come up on $sock; see $log"
fi

for image in "${IMAGES[@]}"; do
  want="$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null)" \
    || abort "Docker has no $image: run scripts/setup-engine.sh (and build-base) first"
  have="$(as_user podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  # Podman keeps Docker's image id (sha256 of the config), so a match means the same image.
  if [ "sha256:$have" = "$want" ] || [ "$have" = "$want" ]; then continue; fi
  docker save "$image" | as_user podman load --quiet >/dev/null 2>"$STATE_DIR/rootless-load.err" \
    || abort "loading $image into $USER_NAME's storage failed: $(tail -n 1 "$STATE_DIR/rootless-load.err")"
done

printf '%s\n' "$sock"
printf 'setup-rootless-podman: ready\n' >&2
