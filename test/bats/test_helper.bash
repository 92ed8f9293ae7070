# Shared bats set-up: a fresh HOME and a stub directory first on PATH for every test.
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export ROOT
load "$ROOT/node_modules/bats-support/load.bash"
load "$ROOT/node_modules/bats-assert/load.bash"

common_setup() {
  # The scripts source their libraries from here (the image installs them in /usr/local/lib/agent-sandbox).
  export AGENT_SANDBOX_LIB_DIR="$ROOT/base-image"
  TEST_TMP="$(mktemp -d)"
  export TEST_TMP
  export HOME="$TEST_TMP/home"
  mkdir -p "$HOME"
  STUB_BIN="$TEST_TMP/stubs"
  mkdir -p "$STUB_BIN"
  export STUB_BIN
  export PATH="$STUB_BIN:$PATH"
  # Calls to stubs are logged here, one line per call: "name arg1 arg2 ..."
  export STUB_LOG="$TEST_TMP/stub.log"
  : > "$STUB_LOG"
}

common_teardown() {
  rm -rf "$TEST_TMP"
}

# stub NAME [BODY]: an executable NAME on PATH that logs its argv and then runs BODY (default: exit 0).
# The log line is one write, so stubs that run at the same time never interleave their lines.
stub() {
  local name="$1" body="${2:-exit 0}"
  cat > "$STUB_BIN/$name" <<STUB
#!/usr/bin/env bash
__stub_line="$name"
for a in "\$@"; do __stub_line+=" \$a"; done
printf '%s\n' "\$__stub_line" >> "\$STUB_LOG"
unset __stub_line
$body
STUB
  chmod +x "$STUB_BIN/$name"
}
