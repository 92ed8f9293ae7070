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
