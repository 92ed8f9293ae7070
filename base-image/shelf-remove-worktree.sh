#!/usr/bin/env bash
# shelf-remove-worktree.sh BRANCH BRANCH_DIR FORCE UID GID
#
# Removes the worktree /repo-shelf/worktrees/BRANCH_DIR, run by the CLI as root
# in a short-lived container. Unless FORCE is 1, it refuses when the worktree
# holds uncommitted changes or commits that no remote has (nothing is lost
# silently), printing "lost: <line>" for each and exiting 3. The branch itself
# stays in the shelf repository, so its commits remain reachable.
set -euo pipefail

abort() { printf 'shelf-remove-worktree: %s\n' "$*" >&2; exit 1; }
[ "$#" -eq 5 ] || abort "usage: shelf-remove-worktree.sh BRANCH BRANCH_DIR FORCE UID GID"
branch="$1" branch_dir="$2" force="$3" uid="$4" gid="$5"
[[ "$branch_dir" =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]] || abort "unsafe worktree directory name: $branch_dir"

REPO="${AGENT_SANDBOX_SHELF:-/repo-shelf}/repo"
dir="${AGENT_SANDBOX_SHELF:-/repo-shelf}/worktrees/$branch_dir"
GIT="${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}"
g() { setpriv --reuid="$uid" --regid="$gid" --clear-groups env HOME=/tmp "$GIT" -c safe.directory='*' "$@"; }
[ "$(id -u)" = 0 ] || g() { env HOME=/tmp "$GIT" -c safe.directory='*' "$@"; }

if [ ! -e "$dir" ]; then
  printf 'worktree: absent\n'
  exit 0
fi
if [ "$force" != 1 ]; then
  # A check that fails refuses: a worktree git cannot read may still hold work.
  changes="$(g -C "$dir" status --porcelain)" || abort "cannot check $dir for uncommitted changes; use --force to remove it anyway"
  # HEAD too: commits made on a detached HEAD exist only in this worktree.
  unpushed="$(g -C "$dir" log --oneline HEAD "refs/heads/$branch" --not --remotes --)" || abort "cannot check $dir for unpushed commits; use --force to remove it anyway"
  [ -z "$changes" ] || printf '%s\n' "$changes" | sed 's/^/lost: uncommitted /'
  [ -z "$unpushed" ] || printf '%s\n' "$unpushed" | sed 's/^/lost: unpushed /'
  [ -z "$changes$unpushed" ] || exit 3
fi
g -C "$REPO" worktree remove --force "$dir"
g -C "$REPO" worktree prune
printf 'worktree: removed\n'
