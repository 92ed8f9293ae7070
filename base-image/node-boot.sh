#!/bin/sh
# node-boot ARGS...: run `node ARGS...`, started from the image's start-up
# snapshot when that snapshot fits; else plainly. The egress gateway's program
# (src/lib/sandbox/spec-companions.ts buildGatewaySpec).
#
# Debian's node is built without node's own start-up snapshot: every start
# compiles node's bootstrap from source, about 0.2 s of the gateway's cold
# start on a 2-core machine (docs/PERFORMANCE.md). The base image makes a
# snapshot of that bootstrap once (`node FLAGS --build-snapshot` of an empty
# script, base-image/Dockerfile), and records beside it the node binary it was
# made by and the V8 flags it was made with. node refuses a snapshot of
# another version (exit 14) and V8 aborts on one made with other flags, so the
# snapshot is used only when both still match: a workspace image that installs
# another node, or a caller with other flags, gets a plain start.
#
# The record, BLOB.id, is one line: "IDENTITY -- FLAGS...". IDENTITY is
# "PATH:SIZE:MTIME" of the node binary and of the libnode it is linked with
# (Debian's node is a small binary over libnode.so; symbolic links followed),
# FLAGS the V8 flags. The flags match when ARGS are exactly them, then the
# program (or -e/-p and a script): any other option, or NODE_OPTIONS, could
# change V8's configuration, on which node would exit 14.
set -eu

blob=${NODE_BOOT_BLOB:-/usr/local/lib/agent-sandbox/node-boot.blob}
node=${NODE_BOOT_NODE:-/usr/bin/node}
libs=${NODE_BOOT_LIBS:-/usr/lib/*/libnode.so.* /usr/lib/libnode.so.*}

words() { printf '%s' "$*"; }

# identity: the node binary and any libnode, as the record names them.
identity() {
  set -- "$node"
  for f in $libs; do
    if [ -e "$f" ]; then set -- "$@" "$f"; fi
  done
  # shellcheck disable=SC2046 # one word per file: paths without spaces
  words $(stat -L -c '%n:%s:%Y' "$@")
}

fits() {
  [ -r "$blob" ] && [ -r "$blob.id" ] || return 1
  [ -z "${NODE_OPTIONS:-}" ] || return 1
  IFS= read -r record < "$blob.id" || [ -n "${record:-}" ] || return 1
  id=$(identity 2> /dev/null) || return 1
  case "$record" in
    "$id --") flags="" ;;
    "$id -- "*) flags=${record#"$id -- "} ;;
    *) return 1 ;;
  esac
  # Each recorded flag, in order, at the front of ARGS (word by word: flags hold no spaces).
  set -f
  for flag in $flags; do
    if [ "${1:-}" != "$flag" ]; then
      set +f
      return 1
    fi
    shift
  done
  set +f
  # Then the program, or a script to evaluate: nothing else that could be a V8 option.
  case "${1:-}" in
    -e | -p | --eval | --print) return 0 ;;
    "" | -*) return 1 ;;
  esac
  return 0
}

if [ "${1:-}" = --build ]; then
  # node-boot --build FLAGS...: make the snapshot and its record (base-image/Dockerfile, as root).
  shift
  script=$(mktemp)
  : > "$script"
  "$node" "$@" --snapshot-blob "$blob" --build-snapshot "$script"
  rm -f "$script"
  printf '%s --%s\n' "$(identity)" "${*:+ $*}" > "$blob.id"
  chmod 0644 "$blob" "$blob.id"
  # The proof that it fits and loads: the image build fails here rather than every gateway later.
  fits "$@" -e '' || { echo "node-boot: the snapshot just made does not match its record in $blob.id" >&2; exit 1; }
  exec "$node" --snapshot-blob "$blob" "$@" -e ''
fi

if fits "$@"; then
  exec "$node" --snapshot-blob "$blob" "$@"
fi
exec "$node" "$@"
