#!/usr/bin/env bash
# volume-helper.sh OP:MODE:NAME...: update files in an agent config volume.
#
# Run by `agent-sandbox codex-init-config`, `claude-init-config` and
# `codex-logout` as `bash -c "$(cat volume-helper.sh)" volume-helper ARGS` in a
# throw-away container of the base image (root, no network) that mounts the
# volume at /target. The new files' contents arrive on stdin as a base64-encoded
# tar archive (never in argv or the environment: they may be credentials).
#
# Each argument is one of:
#   create:MODE:NAME   write NAME unless it exists ("kept")
#   replace:MODE:NAME  write NAME, replacing what is there
#   remove::NAME       delete NAME
# Files are written atomically (staged in the volume, then renamed) and get the
# owner of the volume's top directory, so that a sandbox whose `node` was
# renumbered to the workspace owner can still read them; a new (root-owned)
# volume is first given to the image's `node` (1000). Prints `owner UID:GID`,
# then one `ACTION NAME` line per argument: created, replaced, kept, removed or absent.
set -euo pipefail

DIR="${AGENT_SANDBOX_HELPER_DIR:-/target}"
NODE_ID=1000

abort() {
  printf 'volume-helper: %s\n' "$*" >&2
  exit 1
}

# Left behind only if an earlier run was killed.
rm -rf "$DIR"/.agent-sandbox-import.*
stage="$(mktemp -d "$DIR/.agent-sandbox-import.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
base64 -d | tar -x -f - -C "$stage" --no-same-owner || abort "cannot unpack the files sent on stdin"

read -r uid gid < <(stat -c '%u %g' "$DIR")
if [[ "$uid" == 0 ]]; then
  uid="$NODE_ID" gid="$NODE_ID"
  chown "$uid:$gid" "$DIR"
  chmod 0755 "$DIR"
fi
printf 'owner %s:%s\n' "$uid" "$gid"

for spec in "$@"; do
  op="${spec%%:*}" rest="${spec#*:}"
  mode="${rest%%:*}" name="${rest#*:}"
  [[ -n "$name" && "$name" != */* && "$name" != . && "$name" != .. ]] || abort "bad file name: $name"
  path="$DIR/$name"
  case "$op" in
    create | replace)
      [[ -f "$stage/$name" ]] || abort "no content sent for $name"
      [[ ! -d "$path" || -L "$path" ]] || abort "$name is a directory in the volume"
      if [[ -e "$path" || -L "$path" ]]; then
        if [[ "$op" == create ]]; then
          printf 'kept %s\n' "$name"
          continue
        fi
        action=replaced
      else
        action=created
      fi
      chown "$uid:$gid" "$stage/$name"
      chmod "$mode" "$stage/$name"
      mv -f "$stage/$name" "$path"
      printf '%s %s\n' "$action" "$name"
      ;;
    remove)
      if [[ -e "$path" || -L "$path" ]]; then
        rm -f -- "$path"
        printf 'removed %s\n' "$name"
      else
        printf 'absent %s\n' "$name"
      fi
      ;;
    *) abort "unknown operation: $op" ;;
  esac
done
