# shellcheck shell=bash
# scripts/lib.sh: what the set-up scripts share (sourced, not run). The caller defines log and abort.

apt_updated=0
# apt_install PKG...: install the packages that are missing (as root), quietly on stdout.
apt_install() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || abort "need root to install: ${missing[*]}"
  if [ "$apt_updated" = 0 ]; then
    apt-get update -qq >&2 || abort "apt-get update failed"
    apt_updated=1
  fi
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || abort "cannot install ${missing[*]}"
}

# start_dockerd STATE_DIR [DOCKERD_ARG...]: dockerd in the background, from /
# (a daemon's working directory is where its helpers leave files, conmon's
# "oom"), its log appended to STATE_DIR/dockerd.log and its pid in
# STATE_DIR/dockerd.pid; returns once `docker info` answers (DOCKER_HOST as set).
start_dockerd() {
  local state="$1"
  shift
  (cd / && exec nohup dockerd "$@" >>"$state/dockerd.log" 2>&1) &
  echo $! >"$state/dockerd.pid"
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  abort "dockerd did not come up; see $state/dockerd.log"
}

# start_podman_service STATE_DIR SOCKET_PATH: `podman system service` on the
# socket in the background, from / (as dockerd), its log appended to
# STATE_DIR/podman.log and its pid in STATE_DIR/podman.pid; returns once it answers.
start_podman_service() {
  local state="$1" sock="$2"
  mkdir -p "$(dirname "$sock")"
  (cd / && exec nohup podman system service --time=0 "unix://$sock" >>"$state/podman.log" 2>&1) &
  echo $! >"$state/podman.pid"
  for _ in $(seq 1 60); do
    podman_answers "$sock" && return 0
    sleep 0.5
  done
  abort "podman system service did not come up; see $state/podman.log"
}

podman_answers() { curl -fsS --max-time 2 --unix-socket "$1" http://d/_ping >/dev/null 2>&1; }
