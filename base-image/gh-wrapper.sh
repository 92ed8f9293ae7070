#!/usr/bin/env bash
# gh [ARGS...]: the GitHub CLI with the GitHub App token, read fresh on every call.
#
# Installed as /usr/local/bin/gh, ahead of the real gh (/usr/bin/gh, or
# $AGENT_SANDBOX_REAL_GH) on PATH. When the token file exists and the caller
# has not set a token of its own, it exports the token for that one exec only:
# GH_TOKEN for github.com (and *.ghe.com), GH_ENTERPRISE_TOKEN plus GH_HOST for
# GitHub Enterprise Server. The token is read with shell builtins (never in an
# argv); arguments, stdin/stdout and the exit status pass through untouched.
# In a sandbox the file holds a surrogate of the token, which the egress
# gateway swaps for the real one in requests to the App's hosts.
#
# Environment (defaults in brackets):
#   AGENT_SANDBOX_GHAPP_TOKEN_FILE  [/run/secrets/ghapp_token]
#   AGENT_SANDBOX_GHAPP_GH_HOST     [github.com] the host the App token is for
#   AGENT_SANDBOX_REAL_GH           [/usr/bin/gh]
set -euo pipefail

REAL_GH="${AGENT_SANDBOX_REAL_GH:-/usr/bin/gh}"
TOKEN_FILE="${AGENT_SANDBOX_GHAPP_TOKEN_FILE:-/run/secrets/ghapp_token}"
HOST="${AGENT_SANDBOX_GHAPP_GH_HOST:-github.com}"

abort() {
  printf 'gh (agent-sandbox wrapper): %s\n' "$*" >&2
  exit 1
}

[[ -x "$REAL_GH" ]] || abort "the real gh is not at $REAL_GH"

token=""
if [[ -r "$TOKEN_FILE" ]]; then
  IFS= read -r token < "$TOKEN_FILE" || true
fi
if [[ -n "$token" ]]; then
  if [[ "$HOST" == github.com || "$HOST" == *.ghe.com ]]; then
    if [[ -z "${GH_TOKEN:-}" && -z "${GITHUB_TOKEN:-}" ]]; then export GH_TOKEN="$token"; fi
  elif [[ -z "${GH_ENTERPRISE_TOKEN:-}" && -z "${GITHUB_ENTERPRISE_TOKEN:-}" ]]; then
    export GH_ENTERPRISE_TOKEN="$token"
    export GH_HOST="${GH_HOST:-$HOST}"
  fi
fi
unset token
exec "$REAL_GH" "$@"
