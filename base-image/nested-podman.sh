#!/usr/bin/env bash
# nested-podman.sh: give `node` rootless Podman in a sandbox with nestedContainers.
#
# Installed as /usr/local/sbin/nested-podman. The entrypoint runs it as root,
# after the firewall, when AGENT_SANDBOX_NESTED=1 (docs/security.md, "Nested
# containers"):
#   1. /dev/fuse and /dev/net/tun become node's (mode 0600): pasta and
#      fuse-overlayfs open them as node; nothing else in the sandbox may;
#   2. the storage volume (AGENT_SANDBOX_NESTED_STORE) becomes node's;
#   3. the storage driver is chosen by trying it as node, in a user namespace,
#      on that volume: native overlay, else fuse-overlayfs, else vfs. A store
#      that already holds images keeps the driver it was made with;
#   4. /etc/containers/storage.conf gets that driver; the driver goes to
#      $STATE/nested-storage for doctor;
#   5. `podman system service` starts as node, serving the socket DOCKER_HOST
#      names ($STATE/podman/podman.sock), and is waited for.
# Every nested container's traffic leaves through pasta (or slirp4netns) as
# node, in the sandbox's own network namespace, so the firewall applies to it.
# Exits 1 with one line on stderr if a step fails.
# The small programs run as node take their own arguments in single quotes.
# shellcheck disable=SC2016
set -euo pipefail

NODE_USER="${AGENT_SANDBOX_USER:-node}"
STATE="${AGENT_SANDBOX_STATE_DIR:-/run/agent-sandbox}"
STORE="${AGENT_SANDBOX_NESTED_STORE:-/home/$NODE_USER/.local/share/containers}"
STORAGE_CONF="${AGENT_SANDBOX_STORAGE_CONF:-/etc/containers/storage.conf}"
DEVICES="${AGENT_SANDBOX_NESTED_DEVICES:-/dev/fuse /dev/net/tun}"
SOCKET_WAIT="${AGENT_SANDBOX_NESTED_SOCKET_WAIT:-20}"

abort() {
  printf 'nested-podman: %s\n' "$*" >&2
  exit 1
}

# as_node CMD...: run CMD as node without capabilities, in node's home, with a clean environment.
as_node() {
  setpriv --reuid="$NODE_USER" --regid="$NODE_USER" --init-groups --inh-caps=-all \
    env -i HOME="$(getent passwd "$NODE_USER" | cut -d: -f6)" USER="$NODE_USER" LOGNAME="$NODE_USER" \
    PATH=/usr/local/bin:/usr/bin:/bin PODMAN_IGNORE_CGROUPSV1_WARNING=1 "$@"
}

own_devices() {
  local dev
  for dev in $DEVICES; do
    [[ -c "$dev" ]] || abort "device $dev is missing (the CLI passes it in with nestedContainers)"
    if ! chown "$NODE_USER:$NODE_USER" "$dev" || ! chmod 0600 "$dev"; then abort "cannot give $dev to $NODE_USER"; fi
  done
}

own_store() {
  local dir home
  home="$(getent passwd "$NODE_USER" | cut -d: -f6)"
  mkdir -p "$STORE"
  # The volume's mount point and the directories above it in node's home.
  for dir in "$STORE" "$(dirname "$STORE")" "$(dirname "$(dirname "$STORE")")"; do
    [[ "$dir" == "$home"/* ]] || continue
    if [[ "$(stat -c %U "$dir")" != "$NODE_USER" ]]; then chown "$NODE_USER:$NODE_USER" "$dir"; fi
  done
  # A store made by an earlier owner (the workspace owner's uid changed): podman refuses files it cannot write.
  if [[ -n "$(find "$STORE" -mindepth 1 -maxdepth 2 ! -user "$NODE_USER" -print -quit 2>/dev/null)" ]]; then
    chown -R "$NODE_USER:$NODE_USER" "$STORE"
  fi
}

# try_overlay [fuse]: mount an overlay (or fuse-overlayfs) as node in a user namespace, on the store's file system.
try_overlay() {
  local d rc=0
  d="$(as_node mktemp -d "$STORE/.probe.XXXXXX")" || return 1
  as_node mkdir "$d/l" "$d/u" "$d/w" "$d/m"
  if [[ "${1:-}" == fuse ]]; then
    as_node unshare --user --map-root-user --mount sh -c \
      'fuse-overlayfs -o "lowerdir=$1/l,upperdir=$1/u,workdir=$1/w" "$1/m" && umount "$1/m"' sh "$d" > /dev/null 2>&1 || rc=1
  else
    as_node unshare --user --map-root-user --mount sh -c \
      'mount -t overlay overlay -o "lowerdir=$1/l,upperdir=$1/u,workdir=$1/w" "$1/m"' sh "$d" > /dev/null 2>&1 || rc=1
  fi
  rm -rf "$d"
  return "$rc"
}

# choose_driver: the driver a store already uses, else the first that works here.
DRIVER=""
choose_driver() {
  local kept=""
  # node's file, read by root: only a regular one (a FIFO or a link to a device would hang the start).
  if [[ -f "$STORE/.agent-sandbox-driver" && ! -L "$STORE/.agent-sandbox-driver" ]]; then
    read -r -n 32 kept < "$STORE/.agent-sandbox-driver" || true
  fi
  case "$kept" in
    overlay | fuse-overlayfs | vfs)
      if [[ -d "$STORE/storage" ]]; then
        DRIVER="$kept"
        return 0
      fi
      ;;
  esac
  if try_overlay; then
    DRIVER=overlay
  elif command -v fuse-overlayfs > /dev/null && try_overlay fuse; then
    DRIVER=fuse-overlayfs
  else
    DRIVER=vfs
  fi
  # Replaced, not written through: whatever node left at that name is not opened.
  as_node sh -c 'rm -f "$2.new" && printf "%s\n" "$1" > "$2.new" && mv -f "$2.new" "$2"' sh "$DRIVER" "$STORE/.agent-sandbox-driver"
}

write_storage_conf() {
  local driver="$DRIVER" program=""
  if [[ "$DRIVER" == fuse-overlayfs ]]; then driver=overlay program='mount_program = "/usr/bin/fuse-overlayfs"'; fi
  # One uid inside (newuidmap cannot work under no-new-privileges): files of other owners in images become node's.
  mkdir -p "$(dirname "$STORAGE_CONF")"
  cat > "$STORAGE_CONF" << EOF
# Written by nested-podman at every start (agent-sandbox): the measured driver.
[storage]
driver = "$driver"

[storage.options]
ignore_chown_errors = "true"
${program:+
[storage.options.overlay]
$program}
EOF
  printf '%s\n' "$DRIVER" > "$STATE/nested-storage"
}

start_service() {
  local sock="$STATE/podman/podman.sock" i
  install -d -o "$NODE_USER" -g "$NODE_USER" -m 0700 "$STATE/podman"
  as_node sh -c 'exec podman system service --time=0 "unix://$1" >> "$2" 2>&1' sh "$sock" "$STATE/podman/service.log" < /dev/null > /dev/null 2>&1 &
  for ((i = 0; i < SOCKET_WAIT * 20; i++)); do
    [[ -S "$sock" ]] && return 0
    kill -0 "$!" 2> /dev/null || abort "podman system service exited: $(tail -n 1 "$STATE/podman/service.log" 2>/dev/null)"
    sleep 0.05
  done
  abort "podman system service did not open $sock within ${SOCKET_WAIT}s"
}

main() {
  own_devices
  own_store
  choose_driver
  write_storage_conf
  start_service
}

main "$@"
