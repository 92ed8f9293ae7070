#!/usr/bin/env bash
# agent-git.sh WORKTREE HOST_GIT GATE_URL USER: give the agent a git directory of its own.
# agent-git.sh --sync WORKTREE HOST_GIT: step 2 only, as the agent (sandbox-exec
#   runs it when the host's refs changed since the last sync).
#
# Run by the entrypoint, as root, at every start of a bind-mode sandbox (and of
# one-shot `run` containers). WORKTREE/.git is a volume (or a tmpfs) of ours,
# mounted over the host's .git; HOST_GIT is the host's .git, mounted read-only.
# The host's .git is therefore never the agent's to write, whatever the host
# does to the files in it (git replaces .git/config by rename on every write).
#   1. Once (an empty WORKTREE/.git): a repository whose objects come from
#      HOST_GIT through `alternates`, with the host's branches, tags and
#      remote-tracking refs, its HEAD, its index (so that the agent's
#      `git status` agrees with the host's at once), and its remotes' URLs and
#      branches' upstreams. A marker written last makes a crashed run start over.
#   2. Every start: `refs/remotes/host/*` follow the host's branches; a local
#      branch that the host has moved ahead of (the user committed on the host)
#      is fast-forwarded, and for the checked-out one the index follows too.
#   3. Every start: the keys that run programs or pick hooks are pinned in
#      WORKTREE/.git/config.worktree, owned by root in a sticky directory, read
#      by git after the agent's own config (extensions.worktreeConfig), so they
#      win; the remote `host` is GATE_URL, the push gate (git-gate.sh).
#      core.hooksPath is our dispatcher's directory (hook-dispatch.sh);
#      agent-sandbox.hooksDir names the real one.
# git runs as USER; only the ownership steps run as root. Every value is an
# argument, never spliced into a shell string.
#   4. The system git config names WORKTREE a safe directory: its git directory
#      is root's (step 3), which git otherwise refuses as "dubious ownership".
# Env: AGENT_SANDBOX_REAL_GIT (default /usr/bin/git), AGENT_SANDBOX_SYSTEM_GITCONFIG (/etc/gitconfig),
#   AGENT_SANDBOX_HOOK_DISPATCH_DIR, AGENT_SANDBOX_HOOK_DISPATCHER, AGENT_SANDBOX_PROTECT_HOOK_CONFIG.
set -euo pipefail

abort() { printf 'agent-git: %s\n' "$*" >&2; exit 1; }
warn() { printf 'agent-git: warning: %s\n' "$*" >&2; }

sync_only=0
if [[ "${1:-}" == --sync ]]; then
  sync_only=1
  shift
  [[ "$#" -eq 2 ]] || abort "usage: agent-git.sh --sync WORKTREE HOST_GIT"
  set -- "$1" "$2" "" ""
fi
[[ "$#" -eq 4 ]] || abort "usage: agent-git.sh WORKTREE HOST_GIT GATE_URL USER"
wt="$1" host="$2" gate_url="$3" user="$4"
gd="$wt/.git"
GIT="${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}"
MARKER=agent-sandbox-provisioned
# Touched after every sync: sandbox-exec compares the host's refs with it.
STAMP=agent-sandbox-synced

[[ -d "$gd" && ! -L "$gd" ]] || abort "$gd is not a directory (the sandbox's git volume is not mounted)"
[[ -f "$host/HEAD" && -d "$host/objects" ]] || abort "$host is not a git directory"

as_user=()
if [[ "$(id -u)" == 0 && "$sync_only" == 0 ]]; then
  as_user=(setpriv --reuid="$user" --regid="$user" --init-groups)
fi
# The agent's git, as the agent, with nothing from any config but the
# repository's own (and never a program from the host's config: the host's
# repository is only read here, and only with plumbing).
# The agent's config is the agent's: no hook (reference-transaction on every
# ref update), fsmonitor or other program it names runs here (-c wins over it).
SAFE=(-c core.hooksPath=/nonexistent -c core.fsmonitor=false -c core.sshCommand=false -c core.pager=cat -c safe.directory='*')
ag() { "${as_user[@]}" env HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null "$GIT" "${SAFE[@]}" --git-dir="$gd" "$@"; }
hg() { "${as_user[@]}" env HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null "$GIT" "${SAFE[@]}" --git-dir="$host" "$@"; }

# host_refs PATTERN...: "<sha> <ref>" lines of the host's refs.
host_refs() { hg for-each-ref --format='%(objectname) %(refname)' "$@"; }

provision() {
  local tmp line key value
  # A run that crashed half-way left no marker: start over (never from half a repository).
  if [[ -e "$gd/HEAD" ]]; then
    warn "the sandbox's git directory was left half-made; making it again"
    find "$gd" -mindepth 1 -delete
  fi
  if [[ "$(id -u)" == 0 ]]; then chown "$user:" "$gd"; chmod 0755 "$gd"; fi
  "${as_user[@]}" env HOME=/nonexistent GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null \
    "$GIT" --git-dir="$gd" --work-tree="$wt" init -q --template= >/dev/null
  "${as_user[@]}" mkdir -p "$gd/objects/info" "$gd/info" "$gd/refs/heads" "$gd/refs/tags"
  printf '%s\n' "$host/objects" | "${as_user[@]}" tee "$gd/objects/info/alternates" >/dev/null
  # Branches and tags as the host has them, remote-tracking refs too (not the host's
  # own refs/remotes/host/*, which would clash with ours), in one transaction.
  {
    while read -r sha ref; do
      case "$ref" in
        refs/heads/*) printf 'create %s %s\ncreate refs/remotes/host/%s %s\n' "$ref" "$sha" "${ref#refs/heads/}" "$sha" ;;
        refs/remotes/host/*) ;;
        *) printf 'create %s %s\n' "$ref" "$sha" ;;
      esac
    done < <(host_refs refs/heads refs/tags refs/remotes)
  } | ag update-ref --stdin
  if tmp="$(hg symbolic-ref -q HEAD)"; then
    ag symbolic-ref HEAD "$tmp"
  elif tmp="$(hg rev-parse -q --verify HEAD)"; then
    ag update-ref --no-deref HEAD "$tmp"
  fi
  # The host's index describes the same files (the work tree is shared), so the
  # agent's `git status` needs no rehash of the tree. A split index comes with
  # its shared part.
  if [[ -f "$host/index" ]]; then
    "${as_user[@]}" cp -- "$host/index" "$gd/index"
    for tmp in "$host"/sharedindex.*; do
      [[ -f "$tmp" ]] && "${as_user[@]}" cp -- "$tmp" "$gd/"
    done
  fi
  # Remotes' URLs and fetch refspecs, branches' upstreams: everyday settings the
  # agent may change. Nothing that runs a program.
  while IFS= read -r -d '' line; do
    key="${line%%$'\n'*}" value="${line#*$'\n'}"
    [[ "$line" == *$'\n'* ]] || value=""
    case "${key,,}" in
      remote.host.*) ;;
      remote.*.url | remote.*.pushurl | remote.*.fetch | branch.*.remote | branch.*.merge | branch.*.rebase)
        ag config --add "$key" "$value" ;;
    esac
  done < <(hg config --file "$host/config" -z --get-regexp '^(remote|branch)\.' || true)
  : | "${as_user[@]}" tee "$gd/$MARKER" >/dev/null
}

# sync_with_host: refs/remotes/host/* follow the host's branches; local branches
# the host moved ahead of are fast-forwarded (the work tree is shared, so the
# index of the checked-out one follows).
sync_with_host() {
  local sha ref name head="" mine
  local -A ours=()
  head="$(ag symbolic-ref -q HEAD || true)"
  while read -r sha ref; do ours[$ref]="$sha"; done < <(ag for-each-ref --format='%(objectname) %(refname)' refs/heads)
  {
    while read -r sha ref; do
      name="${ref#refs/heads/}"
      printf 'update refs/remotes/host/%s %s\n' "$name" "$sha"
      mine="${ours[$ref]:-}"
      if [[ -n "$mine" && "$mine" != "$sha" ]] && ag merge-base --is-ancestor "$mine" "$sha" 2>/dev/null; then
        if [[ "$ref" == "$head" ]]; then
          # The work tree is shared and already holds the host's files: only the
          # index follows (-i: no look at the work tree, whose files are newer).
          ag --work-tree="$wt" read-tree -m -i "$mine" "$sha" 2>/dev/null || {
            warn "the index could not follow $name to the host's commit; left at ${mine:0:12}"
            continue
          }
        fi
        printf 'update %s %s %s\n' "$ref" "$sha" "$mine"
      fi
    done < <(host_refs refs/heads)
  } | ag update-ref --stdin
  : | "${as_user[@]}" tee "$gd/$STAMP" >/dev/null
}

# Hooks go through hook-dispatch.sh: DISPATCH_DIR, root's, holds a
# link to it for each hook name plus .hooks-dir naming the real directory.
DISPATCH_DIR="${AGENT_SANDBOX_HOOK_DISPATCH_DIR:-/var/lib/agent-sandbox/hooks}"
DISPATCHER="${AGENT_SANDBOX_HOOK_DISPATCHER:-/usr/local/lib/agent-sandbox/hook-dispatch}"
# The hooks that gate a commit, a merge, a rebase or a push get a link even when
# the real directory lacks them now (the user may install them while the
# sandbox runs); any other name only if the real directory has it at start, so
# that git does not start a process for events nobody hooks (reference-transaction
# runs on every ref update).
GATE_HOOKS="applypatch-msg pre-applypatch pre-commit pre-merge-commit prepare-commit-msg commit-msg pre-rebase pre-push"

dispatch_links() { # dispatch_links REAL_HOOKS_DIR
  local name path
  rm -rf -- "$DISPATCH_DIR"
  mkdir -p -- "$DISPATCH_DIR"
  chmod 0755 "$DISPATCH_DIR"
  for name in $GATE_HOOKS; do ln -s -- "$DISPATCHER" "$DISPATCH_DIR/$name"; done
  for path in "$1"/*; do
    name="${path##*/}"
    [[ -f "$path" && -x "$path" && "$name" =~ ^[a-z][a-z0-9-]*$ && ! -e "$DISPATCH_DIR/$name" ]] || continue
    ln -s -- "$DISPATCHER" "$DISPATCH_DIR/$name"
  done
  printf '%s\n' "$1" >"$DISPATCH_DIR/.hooks-dir"
  if [[ "${AGENT_SANDBOX_PROTECT_HOOK_CONFIG:-1}" =~ ^(0|false|no)$ ]]; then : >"$DISPATCH_DIR/.protect-off"; fi
  chmod 0644 "$DISPATCH_DIR"/.[a-z]*
}

# pin: the config that is not the agent's to change, and the remote `host`.
pin() {
  local hooks pager
  hooks="$(hg config --file "$host/config" --get core.hooksPath || true)"
  case "$hooks" in
    "") hooks="$host/hooks" ;;
    /*) [[ "$hooks" == "$wt"/* ]] || { warn "core.hooksPath $hooks is outside the workspace; using the host's .git/hooks"; hooks="$host/hooks"; } ;;
    *) hooks="$wt/${hooks#./}" ;;
  esac
  pager="less"
  ag config core.repositoryformatversion 1
  ag config extensions.worktreeConfig true
  ag config remote.host.url "$gate_url"
  ag config --replace-all remote.host.fetch '+refs/heads/*:refs/remotes/host/*'
  local pinned="$gd/config.worktree"
  if [[ "$(id -u)" == 0 ]]; then
    # Root's file in a root-owned sticky directory: the agent can add its own
    # files (index.lock, HEAD, …) but can neither change nor replace this one.
    rm -f "$pinned"
    dispatch_links "$hooks"
    GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent "$GIT" config --file "$pinned" core.hooksPath "$DISPATCH_DIR"
    GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent "$GIT" config --file "$pinned" agent-sandbox.hooksDir "$hooks"
    GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent "$GIT" config --file "$pinned" core.fsmonitor false
    GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent "$GIT" config --file "$pinned" core.sshCommand ssh
    GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent "$GIT" config --file "$pinned" core.pager "$pager"
    GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent "$GIT" config --file "$pinned" agent-sandbox.pinned true
    chown root:root "$pinned"
    chmod 0644 "$pinned"
    chown "root:$user" "$gd"
    chmod 1775 "$gd"
    GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent "$GIT" config --file "${AGENT_SANDBOX_SYSTEM_GITCONFIG:-/etc/gitconfig}" --replace-all safe.directory "$wt"
  fi
}

if [[ "$sync_only" == 1 ]]; then
  [[ -e "$gd/$MARKER" ]] || abort "$gd is not provisioned yet"
  sync_with_host
  exit 0
fi
if [[ ! -e "$gd/$MARKER" ]]; then
  provision
fi
sync_with_host
pin
