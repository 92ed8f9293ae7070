# root-env.sh: root's scripts in the sandbox run with the image's environment only.
# Sourced (not run) by the entrypoint and by the scripts the CLI runs as root
# (firewall-allow, firewall-status, doctor --mounts); installed 0644 in
# /usr/local/lib/agent-sandbox. The container's environment is the agent's: its
# settings (`env`, `secretEnv`) are there, and root's tools read configuration
# and code from variables (curl: CURL_HOME; iptables: XTABLES_LIBDIR; the
# dynamic linker: LD_PRELOAD; git: GIT_*; dig: HOME). Only inside the image
# (/.agent-sandbox), so that tests on the host keep their stubs.
# shellcheck shell=bash

# clean_root_env: as root in the image, unset every exported variable but
# AGENT_SANDBOX_*, the locale and the terminal, and reset PATH and HOME.
clean_root_env() {
  [[ "$EUID" -eq 0 && -e "${AGENT_SANDBOX_IMAGE_MARKER:-/.agent-sandbox}" ]] || return 0
  local name
  for name in $(compgen -e); do
    case "$name" in
      AGENT_SANDBOX_* | LANG | LC_ALL | TERM | HOSTNAME) ;;
      *) unset "$name" ;;
    esac
  done
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
}
