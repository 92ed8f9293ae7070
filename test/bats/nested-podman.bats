#!/usr/bin/env bats
# base-image/nested-podman.sh with setpriv, unshare, fuse-overlayfs and podman
# stubbed: the storage driver it chooses from what the (stubbed) kernel allows,
# the storage.conf it writes, the driver a store keeps, and the service it
# waits for. chown and chmod are stubbed: the devices here are fakes.

load test_helper

SCRIPT="$ROOT/base-image/nested-podman.sh"

setup() {
  common_setup
  export AGENT_SANDBOX_STATE_DIR="$TEST_TMP/state"
  export AGENT_SANDBOX_NESTED_STORE="$TEST_TMP/store"
  export AGENT_SANDBOX_STORAGE_CONF="$TEST_TMP/storage.conf"
  export AGENT_SANDBOX_NESTED_SOCKET_WAIT=5
  mkdir -p "$AGENT_SANDBOX_STATE_DIR" "$TEST_TMP/dev"
  mknod "$TEST_TMP/dev/fuse" c 1 3
  mknod "$TEST_TMP/dev/tun" c 1 3
  export AGENT_SANDBOX_NESTED_DEVICES="$TEST_TMP/dev/fuse $TEST_TMP/dev/tun"
  # setpriv … env -i VAR=… CMD: run CMD here, with the stubs still on PATH.
  stub setpriv 'while [[ "$1" == --* ]]; do shift; done; [[ "$1" == env ]] && shift; [[ "$1" == -i ]] && shift
while [[ "$1" == *=* ]]; do export "${1?}"; shift; done; export PATH="$STUB_BIN:$PATH"; exec "$@"'
  stub getent "echo node:x:1000:1000::$TEST_TMP/home:/bin/bash"
  stub chown
  stub chmod
  stub install 'while [[ "$1" == -* ]]; do [[ "$1" == -d ]] || shift; shift; done; mkdir -p "$@"'
  # `podman system service --time=0 unix://PATH`: opens the socket and stays.
  stub podman 'echo $$ >> "$TEST_TMP/podman.pids"; exec python3 -c "import socket, sys, time; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); time.sleep(30)" "${4#unix://}"'
  stub fuse-overlayfs
}

# stop_services: the stub services this test started, by their pids.
stop_services() {
  local pid
  if [[ -r "$TEST_TMP/podman.pids" ]]; then
    while read -r pid; do kill "$pid" 2> /dev/null || true; done < "$TEST_TMP/podman.pids"
    rm -f "$TEST_TMP/podman.pids"
  fi
}

teardown() {
  stop_services
  common_teardown
}

@test "native overlay in a user namespace is chosen when the kernel allows it; the service is waited for" {
  stub unshare 'exit 0'
  run "$SCRIPT"
  assert_success
  assert_equal "$(cat "$AGENT_SANDBOX_STATE_DIR/nested-storage")" overlay
  grep -q '^driver = "overlay"$' "$AGENT_SANDBOX_STORAGE_CONF"
  grep -q '^ignore_chown_errors = "true"$' "$AGENT_SANDBOX_STORAGE_CONF"
  run grep -q mount_program "$AGENT_SANDBOX_STORAGE_CONF"
  assert_failure
  [ -S "$AGENT_SANDBOX_STATE_DIR/podman/podman.sock" ]
  grep -q "^chown node:node $TEST_TMP/dev/fuse$" "$STUB_LOG"
  grep -q "^chmod 0600 $TEST_TMP/dev/tun$" "$STUB_LOG"
}

@test "without overlay in a user namespace, fuse-overlayfs; without either, vfs" {
  stub unshare 'case "$*" in *fuse-overlayfs*) exit 0 ;; *) exit 1 ;; esac'
  run "$SCRIPT"
  assert_success
  assert_equal "$(cat "$AGENT_SANDBOX_STATE_DIR/nested-storage")" fuse-overlayfs
  grep -q '^driver = "overlay"$' "$AGENT_SANDBOX_STORAGE_CONF"
  grep -q '^mount_program = "/usr/bin/fuse-overlayfs"$' "$AGENT_SANDBOX_STORAGE_CONF"
  stop_services
  rm -rf "$AGENT_SANDBOX_NESTED_STORE" "$AGENT_SANDBOX_STATE_DIR/podman"
  stub unshare 'exit 1'
  run "$SCRIPT"
  assert_success
  assert_equal "$(cat "$AGENT_SANDBOX_STATE_DIR/nested-storage")" vfs
  grep -q '^driver = "vfs"$' "$AGENT_SANDBOX_STORAGE_CONF"
}

@test "a store that holds images keeps the driver it was made with, without trying another" {
  mkdir -p "$AGENT_SANDBOX_NESTED_STORE/storage"
  echo vfs > "$AGENT_SANDBOX_NESTED_STORE/.agent-sandbox-driver"
  stub unshare 'exit 0'
  run "$SCRIPT"
  assert_success
  assert_equal "$(cat "$AGENT_SANDBOX_STATE_DIR/nested-storage")" vfs
  run grep -q '^unshare' "$STUB_LOG"
  assert_failure
}

@test "a marker naming no driver we know is measured again" {
  mkdir -p "$AGENT_SANDBOX_NESTED_STORE/storage"
  echo 'btrfs"] evil' > "$AGENT_SANDBOX_NESTED_STORE/.agent-sandbox-driver"
  stub unshare 'exit 0'
  run "$SCRIPT"
  assert_success
  grep -q '^driver = "overlay"$' "$AGENT_SANDBOX_STORAGE_CONF"
}

@test "a marker that is not a regular file is not read (a FIFO would hang the start)" {
  mkdir -p "$AGENT_SANDBOX_NESTED_STORE/storage"
  mkfifo "$AGENT_SANDBOX_NESTED_STORE/.agent-sandbox-driver"
  stub unshare 'exit 0'
  run timeout 10 "$SCRIPT"
  assert_success
  grep -q '^driver = "overlay"$' "$AGENT_SANDBOX_STORAGE_CONF"
}

@test "a missing device fails naming it, before anything else" {
  rm "$TEST_TMP/dev/tun"
  run "$SCRIPT"
  assert_failure
  assert_output "nested-podman: device $TEST_TMP/dev/tun is missing (the CLI passes it in with nestedContainers)"
  [ ! -e "$AGENT_SANDBOX_STORAGE_CONF" ]
}

@test "a service that exits fails with its last log line" {
  stub unshare 'exit 0'
  stub podman 'echo "Error: cannot listen" >&2; exit 125'
  run "$SCRIPT"
  assert_failure
  assert_output "nested-podman: podman system service exited: Error: cannot listen"
}
