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

R_HOOKS="skipping hooks is not allowed in the sandbox. Fix what the hook reports, or stop and ask the user."
R_HOOKSPATH="changing core.hooksPath would skip the repository's hooks, which is not allowed in the sandbox. Fix what the hook reports, or stop and ask the user."
R_INCLUDE="including config files for a command or writing include/includeIf can change core.hooksPath, which is not allowed in the sandbox. Set the options you need directly, or stop and ask the user."
R_WORKTREE="core.hooksPath is relative, so overriding the git dir or work tree would skip the repository's hooks. Run git from inside the repository without GIT_DIR/GIT_WORK_TREE/--git-dir/--work-tree, or stop and ask the user."
R_FORCE="rewriting shared history (forced push) is not allowed in the sandbox. Integrate the remote changes (git pull --rebase) and push without force, or stop and ask the user."
R_DELETE="deleting remote branches or tags is not allowed in the sandbox. Stop and ask the user."
R_MIRROR="mirror pushes overwrite and delete remote refs, which is not allowed in the sandbox. Push the branches you mean by name, or stop and ask the user."
R_CFG_PUSH="configuring forced (+), deleting (:dst) or mirror pushes is not allowed in the sandbox. Push without force, or stop and ask the user."
R_CFG_SECTION="renaming or removing this config section can change hooks or push behaviour, which is not allowed in the sandbox. Stop and ask the user."
R_CFG_EDIT="editing config in an editor cannot be checked in the sandbox. Use git config <key> <value> instead, or stop and ask the user."
R_UPDATE_REF="writing refs directly (update-ref) is not allowed in the sandbox. Use git commit, merge, branch or reset instead, or stop and ask the user."
R_COMMIT_TREE="commit-tree makes commits without running hooks and is used to move branches around them, which is not allowed in the sandbox. Use git commit instead, or stop and ask the user."
R_SYMREF="pointing or deleting refs other than HEAD with symbolic-ref is not allowed in the sandbox. Use git branch or git switch instead, or stop and ask the user."
R_SEND_PACK="this command pushes without the pre-push hook or the sandbox's checks. Use git push instead, or stop and ask the user."
R_ALIAS_DEPTH="aliases nested this deep cannot be checked in the sandbox. Use the git command directly, or stop and ask the user."
R_ALIAS_PARSE="this alias cannot be parsed (unclosed quote or trailing backslash), so it cannot be checked in the sandbox. Fix the alias, or stop and ask the user."
R_AUTOCORRECT="unknown command while help.autocorrect is on: the guessed command cannot be checked in the sandbox. Spell the command out, or stop and ask the user."
R_CONFIG_RO="this repository's config is read-only in the sandbox (it can run code on the host through core.fsmonitor, core.pager or core.hooksPath). Use git config --global for your own settings, or ask the user to run the git config command on the host."
R_EXTENSIONS="the repository format and extensions.* decide which settings git reads (the sandbox's pinned hook settings among them), so they are not for changing in the sandbox. Stop and ask the user."
R_CONFIG_READ="the sandbox could not read the git configuration it has to check (git config failed). Fix the configuration, or stop and ask the user."

# Commands that run client-side hooks: the environment and core.hooksPath are checked for them.
HOOK_CMDS=" commit merge pull push am rebase cherry-pick revert checkout switch worktree gc hook receive-pack send-email "
# Builtins of git 2.47 (they win over aliases). git-<cmd> programs in the exec path count too.
BUILTINS=" add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore
 check-mailmap check-ref-format checkout checkout--worker checkout-index cherry cherry-pick clean clone column
 commit commit-graph commit-tree config count-objects credential credential-cache credential-cache--daemon
 credential-store describe diagnose diff diff-files diff-index diff-tree difftool env--helper fast-export
 fast-import fetch fetch-pack fmt-merge-msg for-each-ref for-each-repo format-patch fsck fsck-objects
 fsmonitor--daemon gc get-tar-commit-id grep hash-object help hook index-pack init init-db interpret-trailers
 log ls-files ls-remote ls-tree mailinfo mailsplit maintenance merge merge-base merge-file merge-index
 merge-ours merge-recursive merge-recursive-ours merge-recursive-theirs merge-subtree merge-tree mktag mktree
 multi-pack-index mv name-rev notes pack-objects pack-redundant pack-refs patch-id pickaxe prune prune-packed
 pull push range-diff read-tree rebase receive-pack reflog refs remote remote-ext remote-fd repack replace
 replay rerere reset restore rev-list rev-parse revert rm send-pack shortlog show show-branch show-index
 show-ref sparse-checkout stage stash status stripspace submodule--helper switch symbolic-ref tag unpack-file
 unpack-objects update-index update-ref update-server-info upload-archive upload-archive--writer upload-pack
 var verify-commit verify-pack verify-tag version whatchanged worktree write-tree "

# Option tables (git 2.47), one entry per option: "short|long|type|negatable".
# type: f = no value, r = required value, o = optional value (only attached: -Sx, --gpg-sign=x).
SPEC_COMMIT="q|quiet|f|y v|verbose|f|y F|file|r|y |author|r|y |date|r|y m|message|r|y c|reedit-message|r|y
 C|reuse-message|r|y |fixup|r|y |squash|r|y |reset-author|f|y |trailer|r|n s|signoff|f|y t|template|r|y e|edit|f|y
 |cleanup|r|y |status|f|y S|gpg-sign|o|y a|all|f|y i|include|f|y |interactive|f|y p|patch|f|y o|only|f|y
 n|no-verify|f|y |dry-run|f|y |short|f|y |branch|f|y |ahead-behind|f|y |porcelain|f|y |long|f|y z|null|f|y
 |amend|f|y |no-post-rewrite|f|y u|untracked-files|o|y |pathspec-from-file|r|y |pathspec-file-nul|f|y
 |allow-empty|f|y |allow-empty-message|f|y"
SPEC_MERGE="n||f|n |stat|f|y |summary|f|y |log|o|y |squash|f|y |commit|f|y e|edit|f|y |cleanup|r|y |ff|f|y
 |ff-only|f|n |rerere-autoupdate|f|y |verify-signatures|f|y s|strategy|r|y X|strategy-option|r|y m|message|r|y
 F|file|r|n |into-name|r|y v|verbose|f|y q|quiet|f|y |abort|f|y |quit|f|y |continue|f|y
 |allow-unrelated-histories|f|y |progress|f|y S|gpg-sign|o|y |autostash|f|y |overwrite-ignore|f|y
 |signoff|f|y |no-verify|f|y"
SPEC_PULL="v|verbose|f|y q|quiet|f|y |progress|f|y |recurse-submodules|o|y r|rebase|o|y n||f|n |stat|f|y
 |summary|f|y |log|o|y |signoff|o|y |squash|f|y |commit|f|y |edit|f|y |cleanup|r|y |ff|f|y |ff-only|f|n
 |verify|f|y |verify-signatures|f|y |autostash|f|y s|strategy|r|y X|strategy-option|r|y S|gpg-sign|o|y
 |allow-unrelated-histories|f|y |all|f|y a|append|f|y |upload-pack|r|y f|force|f|y t|tags|f|y p|prune|f|y
 j|jobs|o|y |dry-run|f|y k|keep|f|y |depth|r|y |shallow-since|r|y |shallow-exclude|r|y |deepen|r|y
 |unshallow|f|n |update-shallow|f|y |refmap|r|n o|server-option|r|y 4|ipv4|f|y 6|ipv6|f|y
 |negotiation-tip|r|y |show-forced-updates|f|y |set-upstream|f|y"
SPEC_PUSH="v|verbose|f|y q|quiet|f|y |repo|r|y |all|f|y |branches|f|y |mirror|f|y d|delete|f|y |tags|f|y
 n|dry-run|f|y |porcelain|f|y f|force|f|y |force-with-lease|o|y |force-if-includes|f|y
 |recurse-submodules|r|y |thin|f|y |receive-pack|r|y |exec|r|y u|set-upstream|f|y |progress|f|y
 |prune|f|y |no-verify|f|y |follow-tags|f|y |signed|o|y |atomic|f|y o|push-option|r|y 4|ipv4|f|n 6|ipv6|f|n"
SPEC_AM="i|interactive|f|y n|no-verify|f|y b|binary|f|y 3|3way|f|y q|quiet|f|y s|signoff|f|y u|utf8|f|y
 k|keep|f|y |keep-non-patch|f|y m|message-id|f|y |keep-cr|f|y |no-keep-cr|f|n c|scissors|f|y
 |quoted-cr|r|n |whitespace|r|y |ignore-space-change|f|y |ignore-whitespace|f|y |directory|r|y
 |exclude|r|y |include|r|y C||r|n p||r|n |patch-format|r|y |reject|f|y |resolvemsg|r|y |continue|f|n
 r|resolved|f|n |skip|f|n |abort|f|n |quit|f|n |show-current-patch|o|n |retry|f|n |allow-empty|f|n
 |committer-date-is-author-date|f|y |ignore-date|f|y |rerere-autoupdate|f|y S|gpg-sign|o|y |empty|r|n
 |rebasing|f|y"
SPEC_REBASE="|onto|r|y |keep-base|f|y |no-verify|f|y q|quiet|f|y v|verbose|f|y n|no-stat|f|y |signoff|f|y
 |committer-date-is-author-date|f|y |reset-author-date|f|y |ignore-date|f|y C||r|n |ignore-whitespace|f|y
 |whitespace|r|y f|force-rebase|f|y |no-ff|f|y |continue|f|n |skip|f|n |abort|f|n |quit|f|n
 |edit-todo|f|n |show-current-patch|f|n |apply|f|n m|merge|f|n i|interactive|f|n |rerere-autoupdate|f|y
 |empty|r|n k|keep-empty|f|y |allow-empty-message|f|y |autosquash|f|y |update-refs|f|y S|gpg-sign|o|y
 |autostash|f|y x|exec|r|y r|rebase-merges|o|y |fork-point|f|y s|strategy|r|y X|strategy-option|r|y
 |root|f|y |reschedule-failed-exec|f|y |reapply-cherry-picks|f|y p|preserve-merges|f|y"
SPEC_CONFIG="|global|f|y |system|f|y |local|f|y |worktree|f|y f|file|r|y |blob|r|y |get|f|y |get-all|f|y
 |get-regexp|f|y |get-urlmatch|f|y |replace-all|f|y |add|f|y |unset|f|y |unset-all|f|y |rename-section|f|y
 |remove-section|f|y l|list|f|y |fixed-value|f|y e|edit|f|y |get-color|f|y |get-colorbool|f|y t|type|r|y
 |bool|f|n |int|f|n |bool-or-int|f|n |bool-or-str|f|n |path|f|n |expiry-date|f|n z|null|f|y
 |name-only|f|y |includes|f|y |show-origin|f|y |show-scope|f|y |default|r|y |comment|r|y"
# Extra options of the `git config <subcommand>` forms (2.46+).
SPEC_CONFIG_SUB="$SPEC_CONFIG |all|f|y |value|r|y |regexp|f|y |url|r|y |append|f|y"
SPEC_SYMREF="q|quiet|f|y d|delete|f|y |short|f|y |recurse|f|y m||r|n"
SPEC_FOR_EACH_REPO="|config|r|y |keep-going|f|y"

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

# ---------------------------------------------------------------- option parsing
O_SHORT=() O_LONG=() O_TYPE=() O_NEG=()
load_spec() {
  local e rest
  O_SHORT=() O_LONG=() O_TYPE=() O_NEG=()
  for e in $1; do
    O_SHORT+=("${e%%|*}"); rest=${e#*|}
    O_LONG+=("${rest%%|*}"); rest=${rest#*|}
    O_TYPE+=("${rest%%|*}"); O_NEG+=("${rest#*|}")
  done
}

# resolve_long ARG (without the leading --): git's parse_long_opt.
# Sets R_IDX (>=0 option, -1 unknown, -2 ambiguous), R_UNSET, R_HASVAL, R_VAL, R_CANDS.
resolve_long() {
  local arg=$1 name=${1%%=*} i ln rest fl ofl a3 ab=-1 abu=0 amb=0
  R_IDX=-1 R_UNSET=0 R_HASVAL=0 R_VAL="" R_CANDS=""
  for ((i = 0; i < ${#O_LONG[@]}; i++)); do
    ln=${O_LONG[i]}
    [[ -n $ln ]] || continue
    fl=0 ofl=0
    while :; do
      rest=""
      if [[ $arg == "$ln"* ]]; then
        rest=${arg#"$ln"}
        if [[ -z $rest || $rest == =* ]]; then
          R_IDX=$i R_UNSET=$((fl ^ ofl))
          if [[ -n $rest ]]; then R_HASVAL=1 R_VAL=${rest#=}; fi
          return 0
        fi
        break
      fi
      if [[ $ln == "$name"* ]]; then
        [[ $ab -ge 0 ]] && amb=1
        ab=$i abu=$((fl ^ ofl)); R_CANDS+=" ${O_LONG[i]}:$abu"
        break
      fi
      [[ ${O_NEG[i]} == y ]] || break
      if [[ no- == "$arg"* ]]; then
        fl=1
        [[ $ab -ge 0 ]] && amb=1
        ab=$i abu=$((fl ^ ofl)); R_CANDS+=" ${O_LONG[i]}:$abu"
        break
      fi
      if [[ $arg != no-* ]]; then
        if [[ $ln == no-* ]]; then ln=${ln#no-}; ofl=1; continue; fi
        break
      fi
      fl=1 a3=${arg#no-}
      if [[ $a3 == "$ln"* ]]; then
        rest=${a3#"$ln"}
        if [[ -z $rest || $rest == =* ]]; then
          R_IDX=$i R_UNSET=$((fl ^ ofl))
          if [[ -n $rest ]]; then R_HASVAL=1 R_VAL=${rest#=}; fi
          return 0
        fi
        break
      fi
      if [[ $ln == "$a3"* ]]; then
        [[ $ab -ge 0 ]] && amb=1
        ab=$i abu=$((fl ^ ofl)); R_CANDS+=" ${O_LONG[i]}:$abu"
      fi
      break
    done
  done
  if ((amb)); then R_IDX=-2; return 0; fi
  if ((ab >= 0)); then
    R_IDX=$ab R_UNSET=$abu
    if [[ $arg == *=* ]]; then R_HASVAL=1 R_VAL=${arg#*=}; fi
  fi
  return 0
}

# parse_args MODE ARGS...: parse-options over the loaded spec. MODE is "permute"
# (options anywhere) or "stop" (options end at the first positional).
# Results: EV_OPT/EV_UNSET/EV_VAL/EV_RAW (one event per option; EV_OPT is the long
# name, "-c" for short-only options, "?" for an ambiguous abbreviation with the
# candidates "name:unset ..." in EV_VAL, "?x" for unknown ones) and POS.
parse_args() {
  local mode=$1 a cl ch i name
  shift
  EV_OPT=() EV_UNSET=() EV_VAL=() EV_RAW=() POS=()
  while (($#)); do
    a=$1
    shift
    if [[ $a == -- || $a == --end-of-options ]]; then
      POS+=("$@")
      return 0
    elif [[ $a == --?* ]]; then
      resolve_long "${a:2}"
      if ((R_IDX >= 0)); then
        if [[ ${O_TYPE[R_IDX]} == r && $R_HASVAL == 0 && $R_UNSET == 0 && $# -gt 0 ]]; then
          R_VAL=$1
          shift
        fi
        EV_OPT+=("${O_LONG[R_IDX]}") EV_UNSET+=("$R_UNSET") EV_VAL+=("$R_VAL") EV_RAW+=("$a")
      elif ((R_IDX == -2)); then
        EV_OPT+=("?") EV_UNSET+=(0) EV_VAL+=("$R_CANDS") EV_RAW+=("$a")
      else
        EV_OPT+=("?${a:2}") EV_UNSET+=(0) EV_VAL+=("") EV_RAW+=("$a")
      fi
    elif [[ $a == -?* ]]; then
      cl=${a:1}
      while [[ -n $cl ]]; do
        ch=${cl:0:1} cl=${cl:1}
        for ((i = 0; i < ${#O_SHORT[@]}; i++)); do
          [[ ${O_SHORT[i]} == "$ch" ]] && break
        done
        if ((i == ${#O_SHORT[@]})); then
          EV_OPT+=("?-$ch") EV_UNSET+=(0) EV_VAL+=("") EV_RAW+=("$a")
          continue
        fi
        name=${O_LONG[i]:--$ch}
        case ${O_TYPE[i]} in
          r)
            if [[ -z $cl && $# -gt 0 ]]; then cl=$1; shift; fi
            EV_OPT+=("$name") EV_UNSET+=(0) EV_VAL+=("$cl") EV_RAW+=("$a")
            cl=""
            ;;
          o)
            EV_OPT+=("$name") EV_UNSET+=(0) EV_VAL+=("$cl") EV_RAW+=("$a")
            cl=""
            ;;
          *) EV_OPT+=("$name") EV_UNSET+=(0) EV_VAL+=("") EV_RAW+=("$a") ;;
        esac
      done
    elif [[ $mode == stop ]]; then
      POS+=("$a" "$@")
      return 0
    else
      POS+=("$a")
    fi
  done
  return 0
}

# check_events CMD RULES...: each rule is "name:unset=REASON". Last option wins
# (git commit -n --verify runs the hooks); an ambiguous abbreviation that could
# mean a dangerous option is refused.
check_events() {
  local cmd=$1 i j rule key c
  shift
  local -A last=() raw=()
  for ((i = 0; i < ${#EV_OPT[@]}; i++)); do
    if [[ ${EV_OPT[i]} == "?"* ]]; then
      [[ ${EV_OPT[i]} == "?" ]] || continue
      for rule in "$@"; do
        key=${rule%%=*}
        for c in ${EV_VAL[i]}; do
          [[ $c == "$key" ]] && block "git $cmd ${EV_RAW[i]}" "${rule#*=}"
        done
      done
      continue
    fi
    last[${EV_OPT[i]}]=${EV_UNSET[i]}
    raw[${EV_OPT[i]}]=${EV_RAW[i]}
  done
  for rule in "$@"; do
    key=${rule%%=*} j=${key%:*}
    if [[ -n ${last[$j]+x} && ${last[$j]} == "${key##*:}" ]]; then
      block "git $cmd ${raw[$j]}" "${rule#*=}"
    fi
  done
  return 0
}

# ---------------------------------------------------------------- config helpers
# norm_key KEY: NK_SECTION and NK_NAME, lower-cased (a subsection does not matter here).
norm_key() {
  local k=$1 sec name
  sec=${k%%.*} name=${k##*.}
  NK_SECTION=${sec,,} NK_NAME=${name,,}
}

# check_injected_key KEY WHAT: a config key given for one command (-c, --config-env, env).
check_injected_key() {
  norm_key "$1"
  case $NK_SECTION in
    core)
      [[ $NK_NAME == hookspath ]] && block "$2" "$R_HOOKSPATH"
      [[ $NK_NAME == worktree ]] && WT_OVERRIDE="$2"
      ;;
    include | includeif) block "$2" "$R_INCLUDE" ;;
  esac
  return 0
}

truthy() { # git boolean of a config value; $2 = 1 when the key has a value at all
  [[ $2 == 0 ]] && return 0
  case ${1,,} in false | no | off | 0 | "") return 1 ;; esac
  return 0
}

# A write of KEY (set or unset) with candidate VALUES by `git config`.
check_config_write() {
  local what=$1 mode=$2 key=$3 v
  shift 3
  norm_key "$key"
  case $NK_SECTION in
    core)
      [[ $NK_NAME == hookspath ]] && block "$what" "$R_HOOKSPATH"
      [[ $NK_NAME == repositoryformatversion ]] && block "$what" "$R_EXTENSIONS"
      ;;
    extensions) block "$what" "$R_EXTENSIONS" ;;
    include | includeif) block "$what" "$R_INCLUDE" ;;
    alias)
      if [[ $mode == set ]]; then
        for v in "$@"; do check_alias_value "$what" "$v"; done
      fi
      ;;
    remote)
      if [[ $mode == set && $NK_NAME == push ]]; then
        for v in "$@"; do
          if [[ $v == +* || $v == :?* ]]; then block "$what" "$R_CFG_PUSH"; fi
        done
      fi
      if [[ $mode == set && $NK_NAME == mirror ]]; then
        if (($# == 0)); then block "$what" "$R_CFG_PUSH"; fi
        for v in "$@"; do
          if truthy "$v" 1; then block "$what" "$R_CFG_PUSH"; fi
        done
      fi
      ;;
  esac
  return 0
}

check_section() { # WHAT MODE SECTION
  local s=${3%%.*}
  case ${s,,} in
    core | include | includeif | extensions) block "$1" "$R_CFG_SECTION" ;;
    alias | remote) [[ $2 == rename ]] && block "$1" "$R_CFG_SECTION" ;;
  esac
  return 0
}

# The value of an alias being written: check it as if it were run.
check_alias_value() {
  local what=$1 val=$2 saved_probe=$PROBE saved_via=$VIA
  PROBE=1 VIA="alias value set by '$what'"
  if [[ $val == '!'* ]]; then
    shell_check "$what" "${val:1}"
  elif split_cmdline "$val"; then
    check_argv 1 "${SPLIT[@]}"
  else
    block "$what" "$R_ALIAS_PARSE"
  fi
  PROBE=$saved_probe VIA=$saved_via
  return 0
}

# check_local_config_writable WHAT: a write to the repository's own config
# (no --global/--system/--file/--blob/--worktree) that cannot succeed because
# the sandbox mounts that file read-only gets a message saying what to do,
# instead of git's "Device or resource busy".
check_local_config_writable() {
  local opt dir
  for opt in "${EV_OPT[@]}"; do
    case $opt in global | system | file | blob | worktree) return 0 ;; esac
  done
  dir=$("$REAL_GIT" "${CFG_GLOBALS[@]}" rev-parse --git-common-dir 2>/dev/null) || return 0
  [[ -e "$dir/config" && ! -w "$dir/config" ]] || return 0
  abort "$R_CONFIG_RO"
}

check_config() {
  local what="git config $*" sub action="" i key
  load_spec "$SPEC_CONFIG"
  parse_args stop "$@"
  sub=${POS[0]-}
  case $sub in
    set | unset | get | list | edit | rename-section | remove-section)
      local rest=("${POS[@]:1}")
      load_spec "$SPEC_CONFIG_SUB"
      parse_args permute "${rest[@]}"
      case $sub in
        get | list) return 0 ;;
        edit) block "$what" "$R_CFG_EDIT" ;;
        rename-section) for key in "${POS[@]}"; do check_section "$what" rename "$key"; done ;;
        remove-section) for key in "${POS[@]}"; do check_section "$what" remove "$key"; done ;;
        set | unset)
          # Conservative: every positional may be the key, every later argument its value.
          local pos=("${POS[@]}")
          for ((i = 0; i < ${#pos[@]}; i++)); do
            check_config_write "$what" "$sub" "${pos[i]}" "${pos[@]:i+1}" "${rest[@]}"
          done
          ;;
      esac
      case $sub in set | unset | rename-section | remove-section) check_local_config_writable ;; esac
      return 0
      ;;
  esac
  for ((i = 0; i < ${#EV_OPT[@]}; i++)); do
    [[ ${EV_UNSET[i]} == 0 ]] || continue
    case ${EV_OPT[i]} in
      edit) block "$what" "$R_CFG_EDIT" ;;
      add | replace-all) action="set" ;;
      unset | unset-all) action="unset" ;;
      rename-section | remove-section) action=${EV_OPT[i]} ;;
      get | get-all | get-regexp | get-urlmatch | list | get-color | get-colorbool) [[ -n $action ]] || action="get" ;;
      "?") # ambiguous abbreviation: git refuses it, but assume the most dangerous reading
        case ${EV_VAL[i]} in *edit:0*) block "$what" "$R_CFG_EDIT" ;; esac
        case ${EV_VAL[i]} in *add:0* | *replace-all:0*) action="set" ;; *unset*:0*) action="unset" ;; esac
        case ${EV_VAL[i]} in *rename-section:0*) action=rename-section ;; *remove-section:0*) action=remove-section ;; esac
        ;;
    esac
  done
  if [[ -z $action ]]; then
    if ((${#POS[@]} >= 2)); then action="set"; else action="get"; fi
  fi
  case $action in
    get) return 0 ;;
    rename-section) for key in "${POS[@]}"; do check_section "$what" rename "$key"; done ;;
    remove-section) for key in "${POS[@]}"; do check_section "$what" remove "$key"; done ;;
    set | unset) ((${#POS[@]})) && check_config_write "$what" "$action" "${POS[0]}" "${POS[@]:1}" ;;
  esac
  case $action in set | unset | rename-section | remove-section) check_local_config_writable ;; esac
  return 0
}

# ---------------------------------------------------------------- aliases and shell text
# split_cmdline STRING: git's split_cmdline (alias.c) into SPLIT; fails on bad quoting.
split_cmdline() {
  local s=$1 n=${#1} i c q="" cur=""
  SPLIT=()
  for ((i = 0; i < n; i++)); do
    c=${s:i:1}
    if [[ -z $q && $c == [[:space:]] ]]; then
      SPLIT+=("$cur")
      cur=""
      while ((i + 1 < n)) && [[ ${s:i+1:1} == [[:space:]] ]]; do i=$((i + 1)); done
    elif [[ -z $q && ($c == "'" || $c == '"') ]]; then
      q=$c
    elif [[ -n $q && $c == "$q" ]]; then
      q=""
    else
      if [[ $c == "\\" && $q != "'" ]]; then
        i=$((i + 1))
        ((i < n)) || return 1
        c=${s:i:1}
      fi
      cur+=$c
    fi
  done
  [[ -z $q ]] || return 1
  SPLIT+=("$cur")
  return 0
}

is_builtin() { [[ $BUILTINS == *" $1 "* ]]; }

# real_config ARRAY ARGS...: NUL-separated output of `git <globals> config ARGS` into
# ARRAY. Exit status 1 (nothing found) is fine; anything else refuses the command.
# The status travels as a last record, so no `wait` on the process substitution.
real_config() {
  local -n out=$1
  local last
  shift
  mapfile -d '' -t out < <(
    rc=0
    "$REAL_GIT" "${CFG_GLOBALS[@]}" config "$@" 2>/dev/null || rc=$?
    printf 'rc=%s\0' "$rc"
  )
  ((${#out[@]})) || block "git $CUR_CMD" "$R_CONFIG_READ"
  last=${out[-1]}
  unset 'out[-1]'
  case $last in rc=0 | rc=1) ;; *) block "git $CUR_CMD" "$R_CONFIG_READ" ;; esac
}

# All aliases and help.autocorrect, read once with the command's own config view.
load_aliases() {
  ((ALIASES_LOADED)) && return 0
  ALIASES_LOADED=1
  local recs=() i kv key
  real_config recs -z --get-regexp '^(alias\..*|help\.autocorrect)$'
  for ((i = 0; i < ${#recs[@]}; i++)); do
    kv=${recs[i]} key=${kv%%$'\n'*}
    if [[ $kv == *$'\n'* ]]; then kv=${kv#*$'\n'}; else kv=true; fi
    if [[ $key == help.autocorrect ]]; then AUTOCORRECT=$kv; else ALIASES[${key#alias.}]=$kv; fi
  done
  return 0
}

# shell_check WHAT TEXT [ARGS...]: conservative pattern check of a shell command
# that may run the real git (shell aliases, rebase --exec). Words after `git`
# naming aliases are expanded into the text.
shell_check() {
  local what=$1 text=$2 w i j word low toks=() extra
  shift 2
  text+=" $*"
  for _ in 1 2 3 4; do
    low=${text,,}
    case $low in
      *no-verify* | *hookspath* | *husky* | *lefthook* | *git_config* | *include.path* | *includeif*)
        block "$what" "$R_HOOKS" ;;
      *update-ref* | *commit-tree* | *send-pack* | *http-push*) block "$what" "$R_UPDATE_REF" ;;
    esac
    w=${low//[;&|()<>\`\"\'\{\}=$'\n'$'\t']/ }
    read -r -a toks <<<"$w"
    local has_push=0 has_commit=0
    for word in "${toks[@]}"; do
      case $word in
        push | send-pack) has_push=1 ;;
        commit | am | ci) has_commit=1 ;;
      esac
    done
    for word in "${toks[@]}"; do
      [[ $word == --no-v* ]] && block "$what" "$R_HOOKS"
      if ((has_commit)) && [[ $word =~ ^-[[:alnum:]]*n ]]; then block "$what" "$R_HOOKS"; fi
      if ((has_push)); then
        case $word in
          --fo* | --f | --mi* | --de* | --pr* | +?* | :?*) block "$what" "$R_FORCE" ;;
        esac
        if [[ $word =~ ^-[[:alnum:]]*[fd] ]]; then block "$what" "$R_FORCE"; fi
      fi
    done
    # Follow aliases named right after a `git` word.
    extra=""
    for ((i = 0; i < ${#toks[@]}; i++)); do
      [[ ${toks[i]} == git || ${toks[i]} == */git ]] || continue
      j=$((i + 1))
      while ((j < ${#toks[@]})) && [[ ${toks[j]} == -* ]]; do
        case ${toks[j]} in -c | -C | --git-dir | --work-tree | --namespace | --config-env) j=$((j + 2)) ;; *) j=$((j + 1)) ;; esac
      done
      word=${toks[j]-}
      if [[ -n $word ]] && ! is_builtin "$word"; then
        load_aliases
        [[ -n ${ALIASES[$word]+x} ]] && extra+=" ${ALIASES[$word]}"
      fi
    done
    [[ -n $extra && $text != *"$extra"* ]] || return 0
    text+=$extra
  done
  return 0
}

# ---------------------------------------------------------------- runtime (config) checks
CFG_SCOPE=() CFG_KEY=() CFG_VAL=() CFG_HASVAL=()
query_config() { # REGEX: fills CFG_* with -z --show-scope output of the real git
  local recs=() i kv
  CFG_SCOPE=() CFG_KEY=() CFG_VAL=() CFG_HASVAL=()
  real_config recs -z --show-scope --get-regexp "$1"
  for ((i = 0; i + 1 < ${#recs[@]}; i += 2)); do
    kv=${recs[i + 1]}
    CFG_SCOPE+=("${recs[i]}") CFG_KEY+=("${kv%%$'\n'*}")
    if [[ $kv == *$'\n'* ]]; then CFG_VAL+=("${kv#*$'\n'}") CFG_HASVAL+=(1); else CFG_VAL+=("") CFG_HASVAL+=(0); fi
  done
  return 0
}

check_hook_env() {
  local what="git $1" v
  v=${HUSKY-x}
  case ${v,,} in 0 | false | no | off) block "HUSKY=$v $what" "$R_HOOKS" ;; esac
  [[ -n ${HUSKY_SKIP_HOOKS-} ]] && block "HUSKY_SKIP_HOOKS=$HUSKY_SKIP_HOOKS $what" "$R_HOOKS"
  v=${LEFTHOOK-x}
  case ${v,,} in 0 | false | no | off) block "LEFTHOOK=$v $what" "$R_HOOKS" ;; esac
  [[ -n ${LEFTHOOK_EXCLUDE-} ]] && block "LEFTHOOK_EXCLUDE=$LEFTHOOK_EXCLUDE $what" "$R_HOOKS"
  [[ -n ${SKIP-} ]] && block "SKIP=$SKIP $what" "$R_HOOKS"
  return 0
}

# Where does the effective core.hooksPath come from? (Run once, for commands running hooks.)
check_hooks_path() { # CMD [REGEX]
  local what="git $1" i last=-1
  query_config "${2:-^core\.hookspath\$}"
  for ((i = 0; i < ${#CFG_KEY[@]}; i++)); do
    [[ ${CFG_KEY[i]} == core.hookspath ]] && last=$i
  done
  ((last >= 0)) || return 0
  case ${CFG_SCOPE[last]} in
    local | worktree) ;;
    system) [[ -z ${GIT_CONFIG_SYSTEM+x} ]] || block "GIT_CONFIG_SYSTEM=$GIT_CONFIG_SYSTEM $what" "$R_HOOKSPATH" ;;
    *) block "$what" "core.hooksPath is set in ${CFG_SCOPE[last]} config: $R_HOOKSPATH" ;;
  esac
  if [[ -n $WT_OVERRIDE && ${CFG_VAL[last]} != /* && ${CFG_VAL[last]} != '~'* ]]; then
    block "$WT_OVERRIDE $what" "$R_WORKTREE"
  fi
  return 0
}

runtime_checks() { # CMD [REGEX]
  ((PROBE == 0)) || return 0
  check_hook_env "$1"
  check_hooks_path "$@"
}

# ---------------------------------------------------------------- commands
check_push() {
  local i r repo="" explicit=0 pushall=0 key name
  load_spec "$SPEC_PUSH"
  parse_args permute "$@"
  check_events push "no-verify:0=$R_HOOKS" "force:0=$R_FORCE" "force-with-lease:0=$R_FORCE" \
    "force-if-includes:0=$R_FORCE" "mirror:0=$R_MIRROR" "delete:0=$R_DELETE" "prune:0=$R_DELETE"
  for ((i = 1; i < ${#POS[@]}; i++)); do
    r=${POS[i]}
    explicit=1
    [[ $r == +* ]] && block "git push ${POS[*]}" "$R_FORCE"
    [[ $r == :?* ]] && block "git push ${POS[*]}" "$R_DELETE"
  done
  for ((i = 0; i < ${#EV_OPT[@]}; i++)); do
    case ${EV_OPT[i]} in
      repo) repo=${EV_VAL[i]} ;;
      all | branches | tags) pushall=1 ;;
    esac
  done
  repo=${POS[0]-$repo}
  ((PROBE == 0)) || return 0
  [[ $repo == host && $pushall == 0 ]] && PUSH_TO_HOST=1
  runtime_checks push '^(core\.hookspath|remote\..*\.(push|mirror))$'
  for ((i = 0; i < ${#CFG_KEY[@]}; i++)); do
    key=${CFG_KEY[i]}
    [[ $key == remote.* ]] || continue
    name=${key#remote.} name=${name%.*}
    [[ -z $repo || $repo == "$name" ]] || continue
    if [[ $key == *.mirror ]] && truthy "${CFG_VAL[i]}" "${CFG_HASVAL[i]}"; then
      block "git push${repo:+ $repo}" "remote.$name.mirror is set: $R_MIRROR"
    fi
    if [[ $key == *.push && $explicit == 0 && $pushall == 0 ]]; then
      [[ ${CFG_VAL[i]} == +* ]] && block "git push${repo:+ $repo}" "remote.$name.push is '${CFG_VAL[i]}': $R_FORCE"
      [[ ${CFG_VAL[i]} == :?* ]] && block "git push${repo:+ $repo}" "remote.$name.push is '${CFG_VAL[i]}': $R_DELETE"
    fi
  done
  return 0
}

check_symbolic_ref() {
  load_spec "$SPEC_SYMREF"
  parse_args permute "$@"
  check_events symbolic-ref "delete:0=$R_SYMREF"
  if ((${#POS[@]} >= 2)) && [[ ${POS[0]} != HEAD ]]; then
    block "git symbolic-ref ${POS[0]} ${POS[1]}" "$R_SYMREF"
  fi
  return 0
}

check_rebase() {
  local i
  load_spec "$SPEC_REBASE"
  parse_args permute "$@"
  check_events rebase "no-verify:0=$R_HOOKS"
  for ((i = 0; i < ${#EV_OPT[@]}; i++)); do
    if [[ ${EV_OPT[i]} == exec && ${EV_UNSET[i]} == 0 ]]; then
      shell_check "git rebase ${EV_RAW[i]} ${EV_VAL[i]}" "${EV_VAL[i]}"
    fi
  done
  return 0
}

# Unknown command: git tries git-<cmd> programs, then alias.<cmd>.
check_alias() {
  local depth=$1 cmd=$2 val
  shift 2
  if [[ -x $EXEC_PATH/git-$cmd ]] || type -P "git-$cmd" >/dev/null 2>&1; then return 0; fi
  load_aliases
  if [[ -z ${ALIASES[${cmd,,}]+x} ]]; then
    case ${AUTOCORRECT,,} in
      "" | 0 | never | show | false | no | off) return 0 ;;
    esac
    block "git $cmd" "$R_AUTOCORRECT"
  fi
  val=${ALIASES[${cmd,,}]}
  VIA+="${VIA:+, }alias $cmd = $val"
  ((depth < MAX_DEPTH)) || block "git $cmd" "$R_ALIAS_DEPTH"
  if [[ $val == '!'* ]]; then
    shell_check "git $cmd" "${val:1}" "$@"
    runtime_checks "$cmd"
    return 0
  fi
  split_cmdline "$val" || block "git $cmd" "$R_ALIAS_PARSE"
  check_argv $((depth + 1)) "${SPLIT[@]}" "$@"
}

check_subcommand() {
  local depth=$1 cmd=$2
  shift 2
  CUR_CMD=$cmd
  case $cmd in
    commit)
      load_spec "$SPEC_COMMIT"
      parse_args permute "$@"
      check_events commit "no-verify:0=$R_HOOKS"
      ;;
    merge)
      load_spec "$SPEC_MERGE"
      parse_args permute "$@"
      check_events merge "no-verify:0=$R_HOOKS"
      ;;
    pull)
      load_spec "$SPEC_PULL"
      parse_args permute "$@"
      check_events pull "verify:1=$R_HOOKS"
      ;;
    am)
      load_spec "$SPEC_AM"
      parse_args permute "$@"
      check_events am "no-verify:0=$R_HOOKS"
      ;;
    rebase) check_rebase "$@" ;;
    push) check_push "$@" ;;
    config) check_config "$@" ;;
    update-ref) block "git update-ref" "$R_UPDATE_REF" ;;
    commit-tree) block "git commit-tree" "$R_COMMIT_TREE" ;;
    send-pack | http-push) block "git $cmd" "$R_SEND_PACK" ;;
    symbolic-ref) check_symbolic_ref "$@" ;;
    for-each-repo)
      load_spec "$SPEC_FOR_EACH_REPO"
      parse_args stop "$@"
      local inner=("${POS[@]}")
      ((depth < MAX_DEPTH)) || block "git for-each-repo" "$R_ALIAS_DEPTH"
      check_argv $((depth + 1)) "${inner[@]}"
      return 0
      ;;
    *)
      if ! is_builtin "$cmd"; then
        check_alias "$depth" "$cmd" "$@"
        return 0
      fi
      ;;
  esac
  if [[ $HOOK_CMDS == *" $cmd "* ]]; then runtime_checks "$cmd"; fi
  return 0
}

# check_argv DEPTH ARGV...: git's global options (git.c handle_options), then the command.
check_argv() {
  local depth=$1 a
  shift
  while (($#)); do
    a=$1
    case $a in
      -c)
        (($# >= 2)) || return 0
        check_injected_key "${2%%=*}" "git -c $2"
        CFG_GLOBALS+=(-c "$2")
        shift 2
        ;;
      --config-env | --config-env=*)
        if [[ $a == --config-env ]]; then
          (($# >= 2)) || return 0
          a=$2
          shift
        else
          a=${a#--config-env=}
        fi
        check_injected_key "${a%=*}" "git --config-env=$a"
        CFG_GLOBALS+=("--config-env=$a")
        shift
        ;;
      -C | --git-dir | --work-tree | --namespace)
        (($# >= 2)) || return 0
        CFG_GLOBALS+=("$a" "$2")
        [[ $a == --git-dir || $a == --work-tree ]] && WT_OVERRIDE="git $a $2"
        shift 2
        ;;
      --git-dir=* | --work-tree=*)
        CFG_GLOBALS+=("$a")
        WT_OVERRIDE="git $a"
        shift
        ;;
      --namespace=* | --bare)
        CFG_GLOBALS+=("$a")
        shift
        ;;
      --exec-path=*)
        EXEC_PATH=${a#--exec-path=}
        shift
        ;;
      --attr-source | --super-prefix | --shallow-file) shift 2 || return 0 ;;
      -p | --paginate | -P | --no-pager | --no-replace-objects | --no-lazy-fetch | --no-optional-locks | \
        --no-advice | --literal-pathspecs | --glob-pathspecs | --noglob-pathspecs | --icase-pathspecs | \
        --attr-source=* | --super-prefix=*) shift ;;
      -*) return 0 ;; # --version, --help, --exec-path, --list-cmds=..., or an error: nothing is run
      *) break ;;
    esac
  done
  (($#)) || return 0
  check_subcommand "$depth" "$@"
}

# Config injected through the environment applies to every command.
check_env_config() {
  local n i k
  if [[ -n ${GIT_CONFIG_PARAMETERS-} ]]; then
    local low=${GIT_CONFIG_PARAMETERS,,}
    case $low in
      *hookspath*) block "GIT_CONFIG_PARAMETERS=$GIT_CONFIG_PARAMETERS git" "$R_HOOKSPATH" ;;
      *"'include."* | *"'includeif."*) block "GIT_CONFIG_PARAMETERS=$GIT_CONFIG_PARAMETERS git" "$R_INCLUDE" ;;
    esac
    [[ $low == *"'core.worktree"* ]] && WT_OVERRIDE="GIT_CONFIG_PARAMETERS=..."
  fi
  n=${GIT_CONFIG_COUNT-}
  if [[ $n =~ ^[0-9]+$ ]]; then
    for ((i = 0; i < n; i++)); do
      k=GIT_CONFIG_KEY_$i
      [[ -n ${!k+x} ]] || break
      check_injected_key "${!k}" "$k=${!k} git"
    done
  fi
  if [[ -n ${GIT_DIR-} || -n ${GIT_WORK_TREE-} ]]; then
    WT_OVERRIDE="GIT_DIR/GIT_WORK_TREE=${GIT_DIR-}${GIT_WORK_TREE:+ $GIT_WORK_TREE}"
  fi
  return 0
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
