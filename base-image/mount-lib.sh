# mount-lib.sh: mount point names as /proc/self/mountinfo writes them.
# Sourced (not run) by mount-watch.sh and doctor.sh; installed 0644 in
# /usr/local/lib/agent-sandbox (AGENT_SANDBOX_LIB_DIR overrides, for tests).
# shellcheck shell=bash

# decode_mountpoint VAR FIELD: set VAR to FIELD with the kernel's octal escapes
# undone (mountinfo escapes space, tab, newline and backslash; \134 goes last so
# that an escaped backslash followed by digits is not decoded twice).
decode_mountpoint() {
  local s="$2"
  s="${s//\\040/ }"
  s="${s//\\011/$'\t'}"
  s="${s//\\012/$'\n'}"
  s="${s//\\134/\\}"
  printf -v "$1" '%s' "$s"
}

# encode_mountpoint VAR PATH: the reverse, as the kernel writes PATH in mountinfo.
encode_mountpoint() {
  local s="$2"
  s="${s//\\/\\134}"
  s="${s// /\\040}"
  s="${s//$'\t'/\\011}"
  s="${s//$'\n'/\\012}"
  printf -v "$1" '%s' "$s"
}

# mountinfo_fields LINE PATH_VAR OPTS_VAR: a /proc/self/mountinfo line's mount
# point (decoded) and its mount options. Fields: id parent major:minor root
# MOUNT-POINT OPTIONS ...
mountinfo_fields() {
  # Names of its own: printf -v must reach the caller's variables, not these.
  local _mi_rest="${1#* * * * }" _mi_point _mi_opts
  _mi_point="${_mi_rest%% *}"
  _mi_opts="${_mi_rest#* }"
  _mi_opts="${_mi_opts%% *}"
  decode_mountpoint "$2" "$_mi_point"
  printf -v "$3" '%s' "$_mi_opts"
}
