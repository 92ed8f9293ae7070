#!/usr/bin/env bash
# git-wrapper-parse.sh: git's command line as git 2.47 reads it, for the git
# wrapper (git-wrapper.sh sources it; not run on its own). The builtin and
# option tables, parse-options (long options with unique abbreviations and
# --no- forms, clustered short flags, value-taking options, `--`) and git's
# split_cmdline for alias text. Nothing here decides what is allowed.
# shellcheck shell=bash disable=SC2034

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
