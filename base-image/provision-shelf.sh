#!/usr/bin/env bash
# provision-shelf.sh REPO_NAME BRANCH BRANCH_DIR ORIGIN_URL HOOKS_PATH UID GID
#
# Provisions the repo-shelf for branch mode, idempotently. Run by the CLI as
# root in a short-lived container with the shelf volume at /repo-shelf and the
# host workspace (read-only) at /workspace/REPO_NAME. Every value arrives as an
# argument (data), never spliced into a shell string.
#   1. /repo-shelf/repo: a non-bare repository with remotes `origin` (the host
#      repo's upstream, when it has one) and `host`: the sandbox's push gate
#      (AGENT_SANDBOX_GATE_URL, git-gate.sh), the only way to write the host
#      repository. Here the host repository is read at file:///workspace/REPO_NAME.
#      Created in a temporary directory and renamed, so a crash leaves nothing
#      half-made. A new one is seeded with copies of the host repository's
#      object files, so that the first fetch from the host only writes refs.
#   2. Fetches origin (bounded; when it cannot be reached, warns and goes on
#      with the host alone), then the host.
#   3. /repo-shelf/worktrees/BRANCH_DIR: a worktree of BRANCH, from the local
#      branch if it exists, else origin/BRANCH, else host/BRANCH, else a new
#      branch from the default branch.
#   4. Hook configuration: core.hooksPath points at HOOKS_PATH (a read-only
#      path in every sandbox), and the repository's config is owned by root in
#      a sticky .git directory, so the agent (UID) can neither edit nor replace it.
# Prints "shelf: <key>=<value>" lines on stdout; warnings and git's progress on stderr.
set -euo pipefail

abort() { printf 'provision-shelf: %s\n' "$*" >&2; exit 1; }
warn() { printf 'provision-shelf: warning: %s\n' "$*" >&2; }

[ "$#" -eq 7 ] || abort "usage: provision-shelf.sh REPO_NAME BRANCH BRANCH_DIR ORIGIN_URL HOOKS_PATH UID GID"
repo_name="$1" branch="$2" branch_dir="$3" origin_url="$4" hooks_path="$5" uid="$6" gid="$7"
[[ "$uid" =~ ^[0-9]+$ && "$gid" =~ ^[0-9]+$ ]] || abort "UID and GID must be numbers"
[[ "$branch_dir" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || abort "unsafe worktree directory name: $branch_dir"

SHELF="${AGENT_SANDBOX_SHELF:-/repo-shelf}"
REPO="$SHELF/repo"
WORKTREES="$SHELF/worktrees"
WORKSPACE_ROOT="${AGENT_SANDBOX_WORKSPACE_ROOT:-/workspace}"
HOST_URL="file://$WORKSPACE_ROOT/$repo_name"
GATE_URL="${AGENT_SANDBOX_GATE_URL:-git://127.0.0.1:19418/ws/.git}"
GIT="${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}"
FETCH_TIMEOUT="${AGENT_SANDBOX_FETCH_TIMEOUT:-30}"

/usr/bin/git check-ref-format --branch "$branch" >/dev/null 2>&1 || abort "not a valid branch name: $branch"

# git runs as the sandbox user; only the set-up and the final lock-down run as root.
# safe.directory also in a global config file: git does not pass `-c` settings on
# to the upload-pack it runs in a local repository (the host's, or a local origin),
# which then refuses one owned by another user (a root-owned workspace, say).
safe_config="$(mktemp)"
trap 'rm -f "$safe_config"' EXIT
printf '[safe]\n\tdirectory = *\n' > "$safe_config"
chmod 0644 "$safe_config"
git_cmd=(env HOME=/tmp GIT_CONFIG_GLOBAL="$safe_config" GIT_TERMINAL_PROMPT=0 "$GIT" -c safe.directory='*')
run_as=()
if [ "$(id -u)" = 0 ]; then
  chown "$uid:$gid" "$SHELF"
  run_as=(setpriv --reuid="$uid" --regid="$gid" --clear-groups)
  git_cmd=("${run_as[@]}" "${git_cmd[@]}")
fi
g() { "${git_cmd[@]}" "$@"; }

fetch() { # fetch REMOTE [REFSPEC]: bounded; returns non-zero on failure
  timeout "$FETCH_TIMEOUT" "${git_cmd[@]}" -C "$REPO" fetch --prune --quiet "$@" 2>&1 | sed 's/^/  /' >&2
  return "${PIPESTATUS[0]}"
}

# seed_objects DIR: copy the host repository's packs and loose objects into the
# new repository DIR. A fetch whose wanted objects are all present already only
# checks connectivity and writes refs, where a first fetch over file:// has git
# pack-objects count and compress the whole history (docs/PERFORMANCE.md). These
# are copies: hard links cannot cross from the workspace mount into the shelf
# volume. Regular files only (never symlinks); best effort, since whatever is
# missing is fetched anyway.
seed_objects() {
  local src="$WORKSPACE_ROOT/$repo_name/.git" dst="$1/.git/objects"
  [ -d "$src/objects" ] && [ ! -L "$src" ] && [ ! -L "$src/objects" ] || return 0
  (cd "$src/objects" && find . -mindepth 2 -maxdepth 2 -type f \
      \( -path './pack/pack-*.pack' -o -path './pack/pack-*.idx' -o -regex '\./[0-9a-f][0-9a-f]/[0-9a-f]+' \) -print0 \
    | "${run_as[@]}" xargs -0 -r cp --parents -t "$dst") 2>/dev/null
}

if [ ! -d "$REPO/.git" ]; then
  tmp="$SHELF/.repo.tmp"
  rm -rf "$tmp"
  g init -q "$tmp"
  if ! seed_objects "$tmp"; then
    rm -rf "$tmp"
    g init -q "$tmp"
  fi
  mv "$tmp" "$REPO"
fi
# The config may be root-owned from an earlier run; unlock it while we change it.
[ "$(id -u)" != 0 ] || { chown "$uid:$gid" "$REPO" "$REPO/.git" "$REPO/.git/config"; chmod 0755 "$REPO" "$REPO/.git"; }

set_remote() { # set_remote NAME URL
  if g -C "$REPO" remote get-url "$1" >/dev/null 2>&1; then
    g -C "$REPO" remote set-url "$1" "$2"
  else
    g -C "$REPO" remote add "$1" "$2"
  fi
}
set_remote host "$GATE_URL"
g -C "$REPO" config --replace-all remote.host.fetch '+refs/heads/*:refs/remotes/host/*'
origin_ok=0
if [ -n "$origin_url" ]; then
  set_remote origin "$origin_url"
  if fetch origin; then
    origin_ok=1
  else
    warn "origin ($origin_url) cannot be reached; provisioning from the host repository"
  fi
else
  g -C "$REPO" remote remove origin >/dev/null 2>&1 || true
fi
fetch "$HOST_URL" '+refs/heads/*:refs/remotes/host/*' || abort "cannot fetch from the host repository at $WORKSPACE_ROOT/$repo_name"

has_ref() { g -C "$REPO" show-ref --verify --quiet "$1"; }

remote_head() { # remote_head REMOTE: the REMOTE/BRANCH its HEAD points at, if fetched
  local ref
  local url="$1"
  [ "$1" != host ] || url="$HOST_URL"
  ref="$(g -C "$REPO" ls-remote --symref "$url" HEAD 2>/dev/null | sed -n 's|^ref: refs/heads/\(.*\)\tHEAD$|\1|p' | head -n 1)"
  [ -n "$ref" ] && has_ref "refs/remotes/$1/$ref" && printf '%s/%s\n' "$1" "$ref"
}

# origin's HEAD names its default branch, but the host's HEAD is only whatever
# is checked out there (often a feature branch), so it comes after main/master.
default_branch() {
  local remote ref
  if [ "$origin_ok" = 1 ] && remote_head origin; then return; fi
  for ref in main master; do
    for remote in origin host; do
      if has_ref "refs/remotes/$remote/$ref"; then
        printf '%s/%s\n' "$remote" "$ref"
        return
      fi
    done
  done
  remote_head host
}

mkdir -p "$WORKTREES"
chown "$uid:$gid" "$WORKTREES" 2>/dev/null || true
dir="$WORKTREES/$branch_dir"
g -C "$REPO" worktree prune
source_desc=existing
if [ -e "$dir" ] && ! g -C "$dir" rev-parse --verify --quiet HEAD >/dev/null 2>&1; then
  # Left over from a crashed run: not a worktree git knows.
  if [ -z "$(ls -A "$dir" 2>/dev/null)" ] || [ ! -e "$dir/.git" ]; then
    warn "removing a broken worktree directory left by an earlier run: $dir"
    rm -rf "$dir"
  else
    abort "$dir exists but is not a usable worktree; remove it with: agent-sandbox rm --branch '$branch' --worktree --force"
  fi
fi
if [ ! -e "$dir" ]; then
  if has_ref "refs/heads/$branch"; then
    g -C "$REPO" worktree add --quiet "$dir" "$branch"
    source_desc="local branch"
  elif [ "$origin_ok" = 1 ] && has_ref "refs/remotes/origin/$branch"; then
    g -C "$REPO" worktree add --quiet -b "$branch" "$dir" "origin/$branch"
    source_desc="origin/$branch"
  elif has_ref "refs/remotes/host/$branch"; then
    g -C "$REPO" worktree add --quiet -b "$branch" "$dir" "host/$branch"
    source_desc="host/$branch"
  else
    start="$(default_branch)" || abort "cannot find a default branch to start $branch from (the host repository has no commits?)"
    g -C "$REPO" worktree add --quiet --no-track -b "$branch" "$dir" "$start"
    source_desc="new from $start"
  fi
fi

g -C "$REPO" config core.hooksPath "$hooks_path"
if [ "$(id -u)" = 0 ]; then
  # Root owns the config, in a sticky directory: the agent can neither write nor
  # replace it. The directories above it are root's and sticky too, so that the
  # agent cannot move .git, repo or the shelf aside and put its own config in
  # their place (worktrees find the repository by its absolute path).
  chown root:root "$REPO/.git/config"
  chmod 0644 "$REPO/.git/config"
  chown root:"$gid" "$REPO/.git" "$REPO" "$SHELF"
  chmod 1775 "$REPO/.git" "$REPO" "$SHELF"
fi

printf 'shelf: worktree=%s\n' "$dir"
printf 'shelf: source=%s\n' "$source_desc"
if [ "$origin_ok" = 1 ]; then
  origin_state=reachable
elif [ -n "$origin_url" ]; then
  origin_state=unreachable
else
  origin_state=none
fi
printf 'shelf: origin=%s\n' "$origin_state"
