#!/usr/bin/env bash
# setup-engine.sh: make a container engine and the debian:trixie-slim base available.
#
# For CI and new machines (Debian, run as root). Idempotent:
#   - if no engine answers, installs Debian's docker.io (and iptables, ipset) and
#     starts dockerd in the background, writing its pid to $STATE_DIR/dockerd.pid;
#   - if debian:trixie-slim is absent (no registry reachable), builds it with
#     debootstrap into a cached root file system and imports it;
#   - installs the host tools the tests drive (tmux for a real pseudo-terminal, shellcheck, openssl for test CAs);
#   - with --podman, also installs Podman with DNS for its networks, serves its
#     Docker-compatible API on /run/podman/podman.sock (pid in $STATE_DIR/podman.pid)
#     and imports the same base OS.
# Usage: scripts/setup-engine.sh [--podman]   (prints what it did on stderr)
# Env:   AGENT_SANDBOX_CACHE (default /var/cache/agent-sandbox), DEBIAN_MIRROR.
set -euo pipefail

CACHE="${AGENT_SANDBOX_CACHE:-/var/cache/agent-sandbox}"
STATE_DIR="${AGENT_SANDBOX_CI_STATE:-/tmp/agent-sandbox-ci}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_TAG="debian:trixie-slim"

log() { printf 'setup-engine: %s\n' "$*" >&2; }
abort() { printf 'setup-engine: error: %s\n' "$*" >&2; exit 1; }

mkdir -p "$CACHE" "$STATE_DIR"
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

engine_up() { docker info >/dev/null 2>&1; }

apt_install tmux shellcheck time openssl openssh-client openssh-server

if ! engine_up; then
  if ! command -v dockerd >/dev/null 2>&1; then
    apt_install docker.io iptables ipset
  fi
  engine_up || {
    log "starting dockerd"
    start_dockerd "$STATE_DIR"
  }
fi
log "engine: $(docker version --format '{{.Server.Version}}' 2>/dev/null)"

if ! docker image inspect "$BASE_TAG" >/dev/null 2>&1; then
  rootfs="$CACHE/trixie-rootfs"
  if [ ! -x "$rootfs/bin/bash" ]; then
    apt_install debootstrap
    log "debootstrap trixie into $rootfs"
    rm -rf "$rootfs.tmp"
    debootstrap --variant=minbase trixie "$rootfs.tmp" "$MIRROR" >"$STATE_DIR/debootstrap.log" 2>&1 \
      || abort "debootstrap failed; see $STATE_DIR/debootstrap.log"
    mv "$rootfs.tmp" "$rootfs"
  fi
  log "importing $BASE_TAG"
  tar -C "$rootfs" -c . | docker import - "$BASE_TAG" >/dev/null
fi
if [ "${1:-}" = --podman ]; then
  apt_install podman
  # Names of containers on a user-defined network resolve only with the network
  # backend's DNS, which Debian's podman does not pull in: dnsname for CNI (what
  # it uses when netavark is absent), aardvark-dns for netavark.
  case "$(podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null)" in
    netavark) apt_install aardvark-dns ;;
    *) apt_install golang-github-containernetworking-plugin-dnsname ;;
  esac
  conf=/etc/containers/containers.conf
  # Podman 4.3's default ulimits cannot be applied in this kind of VM.
  if ! grep -q '^default_ulimits' "$conf" 2>/dev/null; then
    mkdir -p /etc/containers
    if grep -q '^\[containers\]' "$conf" 2>/dev/null; then
      sed -i 's/^\[containers\]$/[containers]\ndefault_ulimits = []/' "$conf"
    else
      printf '[containers]\ndefault_ulimits = []\n' >>"$conf"
    fi
  fi
  sock=/run/podman/podman.sock
  if ! podman_answers "$sock"; then
    log "starting podman system service on $sock"
    start_podman_service "$STATE_DIR" "$sock"
  fi
  if ! podman image exists "$BASE_TAG"; then
    log "importing $BASE_TAG into podman"
    docker save "$BASE_TAG" | podman load >/dev/null
  fi
  log "podman: $(podman --version)"
fi
log "ready"
