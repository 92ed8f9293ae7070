#!/usr/bin/env bats
# node-boot (base-image/node-boot.sh): node from the image's start-up snapshot
# only when the snapshot's record names this very node binary and the flags
# it is given; else node plainly. `node` is a stub that records its arguments
# (and, for --build-snapshot, writes the blob it is asked for).

load test_helper

SCRIPT="$ROOT/base-image/node-boot.sh"
FLAGS=(--max-semi-space-size=1 --no-opt --optimize-for-size)

setup() {
  common_setup
  stub node '
out="$TEST_TMP/node.out"
: > "$out"
for a in "$@"; do printf "%s\n" "$a" >> "$out"; done
prev=""
for a in "$@"; do
  if [ "$prev" = --snapshot-blob ] && [ "${NODE_STUB_WRITE:-}" = 1 ]; then printf blob > "$a"; fi
  prev=$a
done
exit "${NODE_STUB_EXIT:-0}"'
  export NODE_BOOT_NODE="$STUB_BIN/node"
  export NODE_BOOT_BLOB="$TEST_TMP/node-boot.blob"
  # A libnode beside it (Debian's node is a small binary over libnode.so), and a pattern that matches nothing.
  mkdir -p "$TEST_TMP/lib"
  printf 'lib' > "$TEST_TMP/lib/libnode.so.115"
  export NODE_BOOT_LIBS="$TEST_TMP/lib/libnode.so.* $TEST_TMP/none/libnode.so.*"
}

teardown() {
  common_teardown
}

# identity: the stub node and the libnode as they are now, as the record names them.
identity() {
  printf '%s %s' "$(stat -L -c '%n:%s:%Y' "$NODE_BOOT_NODE")" "$(stat -L -c '%n:%s:%Y' "$TEST_TMP/lib/libnode.so.115")"
}

# record FLAGS...: a snapshot and a record that names them.
record() {
  printf '%s --%s\n' "$(identity)" "${*:+ $*}" > "$NODE_BOOT_BLOB.id"
  printf blob > "$NODE_BOOT_BLOB"
}

args() {
  tr '\n' ' ' < "$TEST_TMP/node.out"
}

@test "a snapshot made by this node with these flags: node starts from it, every argument passed on" {
  record "${FLAGS[@]}"
  run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs 'two words' --x
  assert_success
  assert_equal "$(args)" "--snapshot-blob $NODE_BOOT_BLOB ${FLAGS[*]} /prog.cjs two words --x "
  assert_equal "$(sed -n 7p "$TEST_TMP/node.out")" 'two words'
}

@test "node or its libnode replaced since (another size or time), or a libnode more: a plain start" {
  record "${FLAGS[@]}"
  touch -d '2001-01-01' "$NODE_BOOT_NODE"
  run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_success
  assert_equal "$(args)" "${FLAGS[*]} /prog.cjs "
  record "${FLAGS[@]}"
  printf 'other lib' > "$TEST_TMP/lib/libnode.so.115"
  run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_equal "$(args)" "${FLAGS[*]} /prog.cjs "
  record "${FLAGS[@]}"
  printf 'lib' > "$TEST_TMP/lib/libnode.so.127"
  run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_equal "$(args)" "${FLAGS[*]} /prog.cjs "
}

@test "other flags than the snapshot was made with (V8 would abort): a plain start" {
  record "${FLAGS[@]}"
  run sh "$SCRIPT" --max-semi-space-size=1 /prog.cjs
  assert_success
  assert_equal "$(args)" "--max-semi-space-size=1 /prog.cjs "
  # A prefix of a flag is not the flag.
  record --no-opt
  run sh "$SCRIPT" --no-optimize /prog.cjs
  assert_equal "$(args)" "--no-optimize /prog.cjs "
}

@test "a snapshot made without flags fits a start without flags only" {
  record
  run sh "$SCRIPT" /prog.cjs
  assert_success
  assert_equal "$(args)" "--snapshot-blob $NODE_BOOT_BLOB /prog.cjs "
  run sh "$SCRIPT" --no-opt /prog.cjs
  assert_equal "$(args)" "--no-opt /prog.cjs "
}

@test "the recorded flags and then one more (a newer CLI's flag on an older image): a plain start" {
  record "${FLAGS[@]}"
  run sh "$SCRIPT" "${FLAGS[@]}" --stack-size=900 /prog.cjs
  assert_success
  assert_equal "$(args)" "${FLAGS[*]} --stack-size=900 /prog.cjs "
  # The flags alone, nothing to run: plain too (node says what is missing).
  run sh "$SCRIPT" "${FLAGS[@]}"
  assert_equal "$(args)" "${FLAGS[*]} "
}

@test "a script to evaluate after the flags (-e, -p) fits" {
  record "${FLAGS[@]}"
  run sh "$SCRIPT" "${FLAGS[@]}" -p '1 + 1'
  assert_success
  assert_equal "$(args)" "--snapshot-blob $NODE_BOOT_BLOB ${FLAGS[*]} -p 1 + 1 "
}

@test "NODE_OPTIONS set (an image's ENV: V8 would read its flags too): a plain start" {
  record "${FLAGS[@]}"
  NODE_OPTIONS=--max-old-space-size=4096 run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_success
  assert_equal "$(args)" "${FLAGS[*]} /prog.cjs "
  # The control: empty is as unset.
  NODE_OPTIONS= run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_equal "$(args)" "--snapshot-blob $NODE_BOOT_BLOB ${FLAGS[*]} /prog.cjs "
}

@test "no snapshot, no record, or an empty record (an image from before it, a failed build): a plain start" {
  run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_success
  assert_equal "$(args)" "${FLAGS[*]} /prog.cjs "
  record "${FLAGS[@]}"
  rm "$NODE_BOOT_BLOB"
  run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_equal "$(args)" "${FLAGS[*]} /prog.cjs "
  record "${FLAGS[@]}"
  : > "$NODE_BOOT_BLOB.id"
  run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_equal "$(args)" "${FLAGS[*]} /prog.cjs "
}

@test "node's exit code is the script's (it execs node)" {
  record "${FLAGS[@]}"
  NODE_STUB_EXIT=14 run sh "$SCRIPT" "${FLAGS[@]}" /prog.cjs
  assert_failure 14
}

@test "--build makes the snapshot with the flags, records node and flags, and proves it loads" {
  NODE_STUB_WRITE=1 run sh "$SCRIPT" --build "${FLAGS[@]}"
  assert_success
  # The build: the flags, then the snapshot of an empty script (the last argument, a temporary file, gone since).
  assert_equal "$(sed -n 1p "$STUB_LOG" | sed 's/ [^ ]*$//')" "node ${FLAGS[*]} --snapshot-blob $NODE_BOOT_BLOB --build-snapshot"
  assert_equal "$(cat "$NODE_BOOT_BLOB.id")" "$(identity) -- ${FLAGS[*]}"
  # The proof: node started from the new snapshot with the same flags.
  assert_equal "$(sed -n 2p "$STUB_LOG")" "node --snapshot-blob $NODE_BOOT_BLOB ${FLAGS[*]} -e "
  assert_equal "$(stat -c '%a' "$NODE_BOOT_BLOB") $(stat -c '%a' "$NODE_BOOT_BLOB.id")" '644 644'
}

@test "--build fails when node cannot make the snapshot" {
  NODE_STUB_EXIT=1 run sh "$SCRIPT" --build "${FLAGS[@]}"
  assert_failure
  [ ! -e "$NODE_BOOT_BLOB.id" ] || fail "a record was written for a snapshot that was not made"
}
