#!/usr/bin/env bats
# base-image/git-askpass-ghapp.sh: answers git's prompts for the App's origin only,
# from the token file read on every call, with shell builtins only.
bats_require_minimum_version 1.5.0

load test_helper

SCRIPT="$ROOT/base-image/git-askpass-ghapp.sh"
TOKEN=ghs_0123456789abcdefghijABCDEFGHIJ012345

setup() {
  common_setup
  export AGENT_SANDBOX_GHAPP_TOKEN_FILE="$TEST_TMP/ghapp_token"
  export AGENT_SANDBOX_GHAPP_GIT_ORIGIN=https://github.com
  printf '%s\n' "$TOKEN" > "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
}

teardown() {
  common_teardown
}

# askpass PROMPT: run the helper with nothing on PATH, so any external command would fail.
askpass() {
  env PATH="$STUB_BIN" /bin/bash "$SCRIPT" "$@"
}

@test "answers x-access-token for the username prompt" {
  run askpass "Username for 'https://github.com': "
  assert_success
  assert_output x-access-token
}

@test "answers the token for the password prompt, without any external command" {
  run askpass "Password for 'https://x-access-token@github.com': "
  assert_success
  assert_output "$TOKEN"
  run askpass "Password for 'https://github.com': "
  assert_success
  assert_output "$TOKEN"
}

@test "reads the file on every call, so a renewed token is used at once" {
  run askpass "Password for 'https://x-access-token@github.com': "
  assert_output "$TOKEN"
  printf 'ghs_renewed\n' > "$TEST_TMP/new" && mv "$TEST_TMP/new" "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
  run askpass "Password for 'https://x-access-token@github.com': "
  assert_output ghs_renewed
}

@test "a token file without a final newline is read whole" {
  printf '%s' "$TOKEN" > "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
  run askpass "Password for 'https://x-access-token@github.com': "
  assert_success
  assert_output "$TOKEN"
}

@test "refuses another host, scheme or port, and says why on stderr only" {
  local p
  for p in "Password for 'https://x-access-token@evil.example': " \
    "Password for 'http://x-access-token@github.com': " \
    "Password for 'https://x-access-token@github.com:8443': " \
    "Password for 'https://x-access-token@github.com.evil.example': " \
    "Username for 'https://gitlab.com': "; do
    run --separate-stderr askpass "$p"
    assert_failure 1
    assert_output ''
    [[ "$stderr" == *"only for https://github.com"* ]]
    [[ "$stderr" != *"$TOKEN"* ]]
  done
}

@test "matches the origin with default ports and case folded" {
  run askpass "Password for 'https://x-access-token@GitHub.com:443': "
  assert_success
  assert_output "$TOKEN"
  AGENT_SANDBOX_GHAPP_GIT_ORIGIN=http://fake-gh:8080 run askpass "Password for 'http://x-access-token@fake-gh:8080': "
  assert_success
  assert_output "$TOKEN"
  AGENT_SANDBOX_GHAPP_GIT_ORIGIN=http://fake-gh:8080 run askpass "Password for 'http://x-access-token@fake-gh': "
  assert_failure 1
}

@test "does not give the token for another user name" {
  run --separate-stderr askpass "Password for 'https://octocat@github.com': "
  assert_failure 1
  assert_output ''
  [[ "$stderr" == *"x-access-token"* ]]
}

@test "fails with a hint when the token file is missing or empty" {
  rm "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
  run --separate-stderr askpass "Password for 'https://x-access-token@github.com': "
  assert_failure 1
  assert_output ''
  [[ "$stderr" == *"no GitHub App token at $AGENT_SANDBOX_GHAPP_TOKEN_FILE"* ]]
  : > "$AGENT_SANDBOX_GHAPP_TOKEN_FILE"
  run --separate-stderr askpass "Password for 'https://x-access-token@github.com': "
  assert_failure 1
  [[ "$stderr" == *"is empty"* ]]
}

@test "answers nothing to prompts that are not git's credential prompts" {
  run --separate-stderr askpass "Enter passphrase for key '/home/node/.ssh/id_ed25519': "
  assert_failure 1
  assert_output ''
  run --separate-stderr askpass
  assert_failure 1
  assert_output ''
}

@test "works as git's GIT_ASKPASS against a server that asks for credentials" {
  # git asks askpass only after a 401; a local server that always answers 401
  # makes git ask both prompts; the request log shows what git sent.
  cat > "$TEST_TMP/server.mjs" <<'JS'
import {appendFileSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:http'
const server = createServer((req, res) => {
  appendFileSync(process.argv[3], `${req.headers.authorization ?? '-'}\n`)
  res.writeHead(401, {'WWW-Authenticate': 'Basic realm="t"', 'Content-Length': '0'}).end()
})
server.listen(0, '127.0.0.1', () => writeFileSync(process.argv[2], String(server.address().port)))
JS
  node "$TEST_TMP/server.mjs" "$TEST_TMP/port" "$TEST_TMP/auth.log" &
  local pid=$! i
  for i in $(seq 50); do [[ -s "$TEST_TMP/port" ]] && break; sleep 0.1; done
  local port
  port="$(cat "$TEST_TMP/port")"
  GIT_ASKPASS="$SCRIPT" AGENT_SANDBOX_GHAPP_GIT_ORIGIN="http://127.0.0.1:$port" GIT_TERMINAL_PROMPT=0 \
    run git -c credential.helper= ls-remote "http://127.0.0.1:$port/o/r.git"
  kill "$pid"
  assert_failure
  # Basic x-access-token:<token>, and the token is not in git's output.
  grep -qx "Basic $(printf 'x-access-token:%s' "$TOKEN" | base64 -w0)" "$TEST_TMP/auth.log"
  [[ "$output" != *"$TOKEN"* ]]
}
