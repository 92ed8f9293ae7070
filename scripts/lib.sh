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
