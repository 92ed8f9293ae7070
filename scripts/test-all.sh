#!/usr/bin/env bash
# test-all.sh: the full test suite (what `npm test` runs): unit, bats, integration.
#
# Needs a running engine and agent-sandbox-base:latest for the integration
# suite (scripts/setup-engine.sh and `agent-sandbox build-base` provide them;
# the integration global set-up builds the base image itself if it is missing).
# Prints one total line at the end: "N passed, N failed, N skipped" (a skipped
# test never counts as passed; nothing here skips on purpose). Exits non-zero if
# any test failed or a suite could not run.
# Podman: the suites in PODMAN_FILES also run against Podman's API socket when
# AGENT_SANDBOX_TEST_PODMAN=1 (CI sets it after scripts/setup-engine.sh --podman),
# beside the Docker integration suite when both are asked for; otherwise a line
# says that suite was not requested.
# Rootless Podman: the rootless suite (test/rootless) runs the CLI as the user
# scripts/setup-rootless-podman.sh creates, when AGENT_SANDBOX_TEST_ROOTLESS=1.
# Engine restart: the engine-restart suite restarts the engine daemon that
# scripts/setup-engine.sh started (scripts/restart-engine.sh), which stops every
# container on it, when AGENT_SANDBOX_TEST_ENGINE_RESTART=1: run it alone, after
# the others (on Podman too with AGENT_SANDBOX_TEST_PODMAN=1).
# Usage: scripts/test-all.sh [unit|bats|integration|podman|rootless|engine-restart]...   (default: all)
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
suites=("$@")
[ "${#suites[@]}" -gt 0 ] || suites=(unit bats integration podman rootless engine-restart)

passed=0
failed=0
skipped=0
broken=0

count_vitest() {
  local file="$1"
  if [ ! -s "$file" ]; then
    broken=$((broken + 1))
    return
  fi
  local p f s
  read -r p f s < <(node -e 'const r=require(process.argv[1]);console.log(r.numPassedTests, r.numFailedTests + r.testResults.filter(t=>t.status==="failed"&&!t.assertionResults.some(a=>a.status==="failed")).length, r.numPendingTests + r.numTodoTests)' "$file")
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
  printf 'suite %s: %s passed, %s failed, %s skipped\n' "$2" "$p" "$f" "$s"
}

# The suites that also run on Podman (its API socket), with AGENT_SANDBOX_TEST_PODMAN=1.
PODMAN_FILES=(
  test/integration/lifecycle.test.ts
  test/integration/run.test.ts
  test/integration/bad-input.test.ts
  test/integration/branch.test.ts
  test/integration/git-guardrails.test.ts
  test/integration/host-git.test.ts
  test/integration/protected-watch.test.ts
  test/integration/root-env.test.ts
  test/integration/dns.test.ts
  test/integration/gateway.test.ts
  test/integration/gateway-intercept.test.ts
  test/integration/gateway-ops.test.ts
  test/integration/grants.test.ts
  test/integration/github-app.test.ts
  test/integration/gateway-smuggling.test.ts
  test/integration/heal.test.ts
  test/integration/firewall-ports.test.ts
  test/integration/agent-logins.test.ts
  test/integration/approvals.test.ts
  test/integration/watch.test.ts
)
podman_requested() {
  [ "${AGENT_SANDBOX_TEST_PODMAN:-0}" = 1 ] && [[ " ${suites[*]} " == *" podman "* ]]
}
run_podman() {
  DOCKER_HOST="${AGENT_SANDBOX_PODMAN_HOST:-unix:///run/podman/podman.sock}" AGENT_SANDBOX_ENGINE=podman AGENT_SANDBOX_IT_ID=podman \
    npx vitest run --project integration --reporter=default --reporter=json --outputFile.json="$out/podman.json" "${PODMAN_FILES[@]}"
}
podman_pid=""

for suite in "${suites[@]}"; do
  case "$suite" in
    unit | integration)
      printf '\n=== %s tests ===\n' "$suite"
      if [ "$suite" = integration ]; then
        npm run build --silent >/dev/null || { echo "test-all: npm run build failed" >&2; broken=$((broken + 1)); continue; }
        # The two engines share nothing a test uses (each run has its own AGENT_SANDBOX_IT_ID, state
        # and workspaces): the Podman suites run beside Docker's, their output shown after it.
        if podman_requested; then
          echo "test-all: the Podman suites run meanwhile (their output follows the Docker suites)"
          run_podman > "$out/podman.log" 2>&1 &
          podman_pid=$!
        fi
      fi
      npx vitest run --project "$suite" --reporter=default --reporter=json --outputFile.json="$out/$suite.json"
      rc=$?
      count_vitest "$out/$suite.json" "$suite"
      [ "$rc" -eq 0 ] || [ -s "$out/$suite.json" ] || broken=$((broken + 1))
      ;;
    bats)
      printf '\n=== bats tests ===\n'
      node_modules/bats/bin/bats --recursive --formatter tap test/bats | tee "$out/bats.tap"
      rc=${PIPESTATUS[0]}
      s=$(grep -c '^ok .* # skip' "$out/bats.tap")
      p=$(($(grep -c '^ok ' "$out/bats.tap") - s))
      f=$(grep -c '^not ok ' "$out/bats.tap")
      passed=$((passed + p))
      failed=$((failed + f))
      skipped=$((skipped + s))
      printf 'suite bats: %s passed, %s failed, %s skipped\n' "$p" "$f" "$s"
      if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then broken=$((broken + 1)); fi
      ;;
    podman)
      if ! podman_requested; then
        printf '\n=== podman tests: not requested (set AGENT_SANDBOX_TEST_PODMAN=1 with a Podman socket at /run/podman/podman.sock) ===\n'
        continue
      fi
      printf '\n=== integration tests on podman ===\n'
      if [ -n "$podman_pid" ]; then
        wait "$podman_pid"
        rc=$?
        cat "$out/podman.log"
      else
        run_podman
        rc=$?
      fi
      count_vitest "$out/podman.json" podman
      [ "$rc" -eq 0 ] || [ -s "$out/podman.json" ] || broken=$((broken + 1))
      ;;
    rootless)
      if [ "${AGENT_SANDBOX_TEST_ROOTLESS:-0}" != 1 ]; then
        printf '\n=== rootless tests: not requested (set AGENT_SANDBOX_TEST_ROOTLESS=1 after scripts/setup-rootless-podman.sh) ===\n'
        continue
      fi
      printf '\n=== rootless Podman tests ===\n'
      npx vitest run --project rootless --reporter=default --reporter=json --outputFile.json="$out/rootless.json"
      rc=$?
      count_vitest "$out/rootless.json" rootless
      [ "$rc" -eq 0 ] || [ -s "$out/rootless.json" ] || broken=$((broken + 1))
      ;;
    engine-restart)
      if [ "${AGENT_SANDBOX_TEST_ENGINE_RESTART:-0}" != 1 ]; then
        printf '\n=== engine-restart tests: not requested (set AGENT_SANDBOX_TEST_ENGINE_RESTART=1; it stops every container on the engine) ===\n'
        continue
      fi
      npm run build --silent >/dev/null || { echo "test-all: npm run build failed" >&2; broken=$((broken + 1)); continue; }
      printf '\n=== engine-restart tests on docker ===\n'
      npx vitest run --project engine-restart --reporter=default --reporter=json --outputFile.json="$out/engine-restart.json"
      rc=$?
      count_vitest "$out/engine-restart.json" engine-restart
      [ "$rc" -eq 0 ] || [ -s "$out/engine-restart.json" ] || broken=$((broken + 1))
      if [ "${AGENT_SANDBOX_TEST_PODMAN:-0}" = 1 ]; then
        printf '\n=== engine-restart tests on podman ===\n'
        DOCKER_HOST="${AGENT_SANDBOX_PODMAN_HOST:-unix:///run/podman/podman.sock}" AGENT_SANDBOX_ENGINE=podman AGENT_SANDBOX_IT_ID=podman \
          npx vitest run --project engine-restart --reporter=default --reporter=json --outputFile.json="$out/engine-restart-podman.json"
        rc=$?
        count_vitest "$out/engine-restart-podman.json" engine-restart-podman
        [ "$rc" -eq 0 ] || [ -s "$out/engine-restart-podman.json" ] || broken=$((broken + 1))
      fi
      ;;
    *)
      echo "test-all: unknown suite: $suite (use unit, bats, integration, podman, rootless, engine-restart)" >&2
      exit 2
      ;;
  esac
done

[ "$broken" -eq 0 ] || echo "test-all: $broken suite(s) did not run to completion" >&2
printf '%d passed, %d failed, %d skipped\n' "$passed" "$((failed + broken))" "$skipped"
[ "$failed" -eq 0 ] && [ "$broken" -eq 0 ]
