#!/usr/bin/env bash
# agent-sandbox git wrapper.
#
# Installed in the image as /usr/local/bin/git, ahead of the real git
# (/usr/bin/git, or $AGENT_SANDBOX_REAL_GIT) on every PATH, and called exactly
# like git: `git [global options] <command> [args]`. It parses the command line
# the way git does (global options, per-command option tables with value-taking
# options, clustered short flags, unique abbreviations and --no- forms of long
# options, options after positionals, `--`), expands aliases, and then either
# `exec`s the real git with the original argv untouched, or refuses with ONE line
# on stderr and exit status 1.
#
# Blocked (the sandbox's guardrails):
#  * Skipping hooks: commit/am -n/--no-verify, merge/push/rebase --no-verify,
#    pull --no-verify (but push -n = --dry-run, merge/pull -n = --no-stat and
#    rebase -n = --no-stat pass); HUSKY=0|false, HUSKY_SKIP_HOOKS, LEFTHOOK=0|false,
#    LEFTHOOK_EXCLUDE and SKIP (pre-commit) in the environment of commands that
#    run hooks.
#  * core.hooksPath, include.path and includeIf.*.path given for one command
#    (-c, --config-env, GIT_CONFIG_COUNT/KEY/VALUE, GIT_CONFIG_PARAMETERS) are
#    refused for every command, even when equal to the repository's own value.
#    Commands that run hooks also ask the real git (same global options and
#    environment) where the effective core.hooksPath comes from: only the
#    repository's own config (local/worktree, read-only in the sandbox) and the
#    image's system config are trusted; a value from ~/.gitconfig, a
#    GIT_CONFIG_GLOBAL/GIT_CONFIG_SYSTEM file or anything they include is
#    refused. A relative core.hooksPath is resolved against the work tree, so
#    --git-dir/--work-tree/GIT_DIR/GIT_WORK_TREE/core.worktree are refused with it.
#  * `git config` writes (set, --add, --replace-all, --unset*, `set`/`unset`
#    subcommands, any --file/--global/...) of core.hooksPath, include.*,
#    includeIf.*; alias.* values that would themselves be blocked;
#    remote.*.push values with a leading `+` or an empty source (`:dst`);
#    remote.*.mirror true; rename/remove of those sections; `config --edit`.
#  * Rewriting or deleting shared history: push -f/--force (in any cluster),
#    --force-with-lease, --force-if-includes, --mirror, -d/--delete, --prune,
#    `+src:dst` and `:dst` refspecs, and for the remote being pushed to (all
#    remotes when none is named) remote.<name>.push `+`/`:dst` refspecs and
#    remote.<name>.mirror. Forced pushes are refused even with --dry-run.
#  * Writing refs around the porcelain: update-ref (every form), commit-tree
#    (it only writes an object, but it is how commits are made without hooks),
#    symbolic-ref writes to anything but HEAD (and -d), send-pack and http-push
#    (they push without the pre-push hook).
#  * Aliases are expanded like git does (builtins win, then git-<cmd> programs,
#    then alias.<cmd>, recursively, at most 16 deep) and the expansion is
#    checked. Shell aliases (`!...`) and `rebase --exec` commands cannot be
#    parsed, so their text plus arguments is checked by pattern, conservatively:
#    mentions of no-verify, hooksPath, husky, GIT_CONFIG, update-ref, commit-tree,
#    send-pack; short clusters with `n` next to commit/am; --force/--mirror/
#    --delete/--prune, -f/-d clusters, `+x` and `:x` words next to push. Such
#    aliases may be refused although harmless. for-each-repo's command is checked.
#  * Unknown commands while help.autocorrect would run a guess.
# Allowed on purpose: local history edits (branch -f/-D, reset --hard, rebase,
# tag -f, fetch -f/--prune, symbolic-ref HEAD), reading any config, and
# everything else. Residual bypasses (outside a wrapper's reach): running
# /usr/bin/git or /usr/lib/git-core/git directly, including from anything git
# itself runs through a shell (editors, GIT_SEQUENCE_EDITOR todo `exec` lines,
# bisect run, submodule foreach, filters), since git puts its exec-path first
# on PATH; working in a copy or clone of the repository (its own hooks); git-*
# programs placed on PATH; objects written by hash-object/stash and later
# reached with reset or merge. Hooks on the remote and CI stay the backstop.
#
# Speed: for plain builtins a few lines at the top `exec` the real git before
# the rest of this file is parsed, with no subprocess. The real git is asked
# for config only by commands that run hooks (one `git config` call; for push
# the same call also reads remote.*) and by unknown commands (one call that
# reads all aliases).
set -euo pipefail

REAL_GIT=${AGENT_SANDBOX_REAL_GIT:-/usr/bin/git}

# The option and builtin tables below are git 2.47's. A git with other options
# could take a spelling the tables do not know, so the image build runs
# `git --agent-sandbox-check-version` (base-image/Dockerfile) and fails on any
# other series: a custom --base-image with another git gets a build error, not
# a wrapper that parses that git's command lines wrongly.
TABLES_GIT_SERIES=2.47
if [[ ${1-} == --agent-sandbox-check-version ]]; then
  version=$("$REAL_GIT" --version 2>/dev/null) || version=''
  if [[ $version =~ ^git\ version\ ([0-9]+\.[0-9]+)(\.|$) ]] && [[ ${BASH_REMATCH[1]} == "$TABLES_GIT_SERIES" ]]; then
    printf 'git-wrapper: %s matches its option tables (git %s.x)\n' "$version" "$TABLES_GIT_SERIES"
    exit 0
  fi
  printf "git-wrapper: error: the image's git is %s, but the git wrapper's option tables are git %s.x's: build FROM an image with git %s (debian:trixie-slim), or update the tables in base-image/git-wrapper.sh\n" \
    "${version:-missing ($REAL_GIT)}" "$TABLES_GIT_SERIES" "$TABLES_GIT_SERIES" >&2
  exit 1
fi

# Fast path, before the rest of this file is even parsed: a builtin that is
# neither checked below nor runs hooks, reached through plain global options
# only (any -c/--config-env, unknown option or config from the environment
# takes the full path).
FAST_CMDS=" add annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore
 check-mailmap check-ref-format checkout-index cherry clean clone column commit-graph count-objects describe
 diagnose diff diff-files diff-index diff-tree difftool fetch fetch-pack for-each-ref format-patch fsck grep
 hash-object help init interpret-trailers log ls-files ls-remote ls-tree maintenance merge-base merge-file
 merge-tree mktag mktree mv name-rev notes pack-refs prune range-diff read-tree reflog remote repack replace
 rerere reset restore rev-list rev-parse rm shortlog show show-branch show-ref sparse-checkout stage stash
 status stripspace submodule tag update-index var verify-commit verify-pack verify-tag version whatchanged
 write-tree "
if [[ -z ${GIT_CONFIG_PARAMETERS-}${GIT_CONFIG_COUNT-} ]]; then
  fast_i=1
  while ((fast_i <= $#)); do
    case ${!fast_i} in
      -C | --git-dir | --work-tree | --namespace) fast_i=$((fast_i + 2)) ;;
      -p | --paginate | -P | --no-pager | --no-replace-objects | --no-lazy-fetch | --no-optional-locks | \
        --no-advice | --literal-pathspecs | --glob-pathspecs | --noglob-pathspecs | --icase-pathspecs | \
        --bare | --git-dir=* | --work-tree=* | --namespace=*) fast_i=$((fast_i + 1)) ;;
      -*) break ;;
      *)
        [[ $FAST_CMDS == *" ${!fast_i} "* ]] && exec "$REAL_GIT" "$@"
        break
        ;;
    esac
  done
fi
EXEC_PATH=${GIT_EXEC_PATH:-/usr/lib/git-core}
MAX_DEPTH=16

# The rest of the wrapper, from the directory this file is in (the image
# installs the parts next to /usr/local/bin/git; tests link them beside it).
WRAPPER_DIR=${BASH_SOURCE[0]%/*}
[[ ${BASH_SOURCE[0]} == */* ]] || WRAPPER_DIR=.
# shellcheck source=base-image/git-wrapper-parse.sh
. "$WRAPPER_DIR/git-wrapper-parse.sh"
# shellcheck source=base-image/git-wrapper-policy.sh
. "$WRAPPER_DIR/git-wrapper-policy.sh"

# Options given to the real git when it is asked for config (same view as the command).
CFG_GLOBALS=()
WT_OVERRIDE=""      # set when the git dir or work tree is overridden (relative core.hooksPath check)
PROBE=0             # 1 while checking an alias value being written: only static checks
PUSH_TO_HOST=0      # 1 for a `git push host …` that the gate may refuse (see push_to_host)
VIA=""              # how the blocked command was reached (aliases), for the message
CUR_CMD=""          # the command being checked, for messages
ALIASES_LOADED=0
declare -A ALIASES=()
AUTOCORRECT=""

abort() {
  local msg="agent-sandbox: $*"
  printf '%s\n' "${msg//$'\n'/ }" >&2
  exit 1
}

# block WHAT REASON: refuse the command; WHAT is the command as the user would recognise it.
block() {
  local via=""
  [[ -n $VIA ]] && via=" (${VIA})"
  abort "blocked '$1'${via}: $2"
}

# push_to_host ARGS: `git push host <branch>` through the sandbox's gate. When the
# gate (or git, seeing the host's branch ahead) refuses a branch because it is
# protected or the push is not a fast-forward, the same commit is kept on the host
# as refs/sandbox/<branch>, for the user to review, and one line says so. The
# push itself still fails (the branch did not move).
push_to_host() {
  local err rc line src dst sha all fd
  local -a lines=()
  # The gate down (stopped, or left in the network of an earlier start of the
  # sandbox): one line that says so and how to repair it, never git's raw
  # connection error. A /dev/tcp connect, as sandbox-exec checks it.
  if [[ -n ${AGENT_SANDBOX_GATE_PORT-} ]]; then
    if { exec {fd}<> "/dev/tcp/127.0.0.1/$AGENT_SANDBOX_GATE_PORT"; } 2> /dev/null; then
      exec {fd}>&-
    else
      printf 'agent-sandbox: git push host: the push gate is down, so nothing reaches the host; any agent-sandbox command on the host (e.g. agent-sandbox exec -- true) repairs it\n' >&2
      return 128
    fi
  fi
  err=$(mktemp) || exec "$REAL_GIT" "$@"
  # stderr through tee, as it comes (push progress); a pipeline, so both have ended after it.
  if { "$REAL_GIT" "$@" 2>&1 1>&3 3>&- | tee "$err" >&2; } 3>&1; then rc=0; else rc=${PIPESTATUS[0]}; fi
  mapfile -t lines < "$err"
  rm -f "$err"
  ((rc != 0)) || return 0
  all=$(printf '%s\n' "${lines[@]}")
  for line in "${lines[@]}"; do
    [[ $line =~ ^\ !\ \[(rejected|remote\ rejected)\]\ +([^ ]+)\ -\>\ ([^ ]+)\ \((non-fast-forward|fetch\ first|pre-receive\ hook\ declined)\) ]] || continue
    src=${BASH_REMATCH[2]} dst=${BASH_REMATCH[3]}
    dst=${dst#refs/heads/}
    [[ $dst != refs/* && $dst != sandbox/* ]] || continue
    # Only what the gate refuses for being protected or behind, not a deletion or a tag.
    if [[ ${BASH_REMATCH[4]} == "pre-receive hook declined" && $all != *"refused refs/heads/$dst: "*"refs/sandbox/"* ]]; then continue; fi
    sha=$("$REAL_GIT" rev-parse --verify --quiet "$src^{commit}") || continue
    if "$REAL_GIT" push --quiet host "+$sha:refs/sandbox/$dst" 2> /dev/null; then
      printf 'agent-sandbox: %s was not updated; your commit %s is kept on the host as refs/sandbox/%s for the user to review\n' "$dst" "${sha:0:12}" "$dst" >&2
    fi
  done
  return "$rc"
}

check_env_config
check_argv 0 "$@"
if ((PUSH_TO_HOST)); then
  push_to_host "$@"
  exit $?
fi
exec "$REAL_GIT" "$@"
