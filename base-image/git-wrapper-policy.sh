#!/usr/bin/env bash
# git-wrapper-policy.sh: what the git wrapper refuses and why (git-wrapper.sh
# sources it; not run on its own; its header lists the guardrails). The
# reasons, the checks of parsed options, config writes, aliases and shell text,
# the runtime checks that ask the real git for config, and the walk over git's
# global options into the command (check_argv).
# shellcheck shell=bash disable=SC2034

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
