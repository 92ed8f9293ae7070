#!/usr/bin/env bash
# git-askpass-ghapp PROMPT: git's GIT_ASKPASS helper for the GitHub App token.
#
# Installed as /usr/local/bin/git-askpass-ghapp; the CLI sets GIT_ASKPASS to it
# only when a GitHub App is configured. git calls it with one argument, its
# prompt, and reads the answer from stdout:
#   "Username for 'https://github.com': "                 -> x-access-token
#   "Password for 'https://x-access-token@github.com': "  -> the token
# In a sandbox the file holds a surrogate of the token: the egress gateway
# puts the real one in place of it in requests to the App's hosts.
# The token is read from the file on every call (the host renews it in place),
# with shell builtins only, so it is never in any process's argv or environment.
# It answers only for the App's git origin, so the token is not offered to
# another server that asks for credentials; anything else exits 1 and git fails.
#
# Environment (defaults in brackets):
#   AGENT_SANDBOX_GHAPP_TOKEN_FILE  [/run/secrets/ghapp_token]
#   AGENT_SANDBOX_GHAPP_GIT_ORIGIN  [https://github.com] scheme://host[:port] the token is for
# Also used on the host by `agent-sandbox init --clone`, with a temporary token file.
set -euo pipefail

TOKEN_FILE="${AGENT_SANDBOX_GHAPP_TOKEN_FILE:-/run/secrets/ghapp_token}"
ORIGIN="${AGENT_SANDBOX_GHAPP_GIT_ORIGIN:-https://github.com}"

abort() {
  printf 'git-askpass-ghapp: %s\n' "$*" >&2
  exit 1
}

# normalise ORIGIN: lower case, without the scheme's default port.
normalise() {
  local o="${1,,}"
  o="${o%/}"
  case "$o" in
    https://*:443) o="${o%:443}" ;;
    http://*:80) o="${o%:80}" ;;
  esac
  printf '%s' "$o"
}

prompt="${1:-}"
re="^(Username|Password) for '([A-Za-z][A-Za-z0-9+.-]*)://([^/']+)'"
[[ "$prompt" =~ $re ]] || abort "not a git credential prompt; nothing answered"
kind="${BASH_REMATCH[1]}"
scheme="${BASH_REMATCH[2]}"
authority="${BASH_REMATCH[3]}"
user=""
hostport="$authority"
if [[ "$authority" == *@* ]]; then
  user="${authority%@*}"
  hostport="${authority##*@}"
fi
asked="$(normalise "$scheme://$hostport")"
[[ "$asked" == "$(normalise "$ORIGIN")" ]] \
  || abort "not answering for $scheme://$hostport: the GitHub App token is only for $ORIGIN"

if [[ "$kind" == Username ]]; then
  printf 'x-access-token\n'
  exit 0
fi
[[ -z "$user" || "$user" == x-access-token ]] \
  || abort "not answering for user '$user': the GitHub App token is for x-access-token (drop the user name from the remote URL)"
[[ -r "$TOKEN_FILE" ]] \
  || abort "no GitHub App token at $TOKEN_FILE (is the token refresher running? see agent-sandbox list on the host)"
token=""
IFS= read -r token < "$TOKEN_FILE" || true
[[ -n "$token" ]] || abort "$TOKEN_FILE is empty (see agent-sandbox list on the host)"
printf '%s\n' "$token"
