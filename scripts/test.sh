#!/usr/bin/env bash
# `npm test`: install if needed, check lint and format, bring PostgreSQL and Kafka up, then run every test
# (unit specs, then the end-to-end suites against the real servers). Extra arguments go to jest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
# Three jest workers, each with its own databases and broker (test/support/test-env.ts): the suites
# mostly wait on servers and timers, so on two cores three side by side finish soonest (measured: two
# workers 536-575 s, three 433 s, four 492 s, the CPU then being the limit). TEST_WORKERS=1 runs them one by one.
export TEST_WORKERS="${TEST_WORKERS:-3}"
# The lint checks (CPU) and the brokers' start (mostly waiting) go side by side; lint's verdict comes first.
echo "Checking types, lint, format and unused code (npm run lint) while PostgreSQL and Kafka start..."
lint_log="$(mktemp)"
trap 'rm -f "$lint_log"' EXIT
npm run --silent lint >"$lint_log" 2>&1 &
lint=$!
source scripts/test-infra.sh
if ! wait "$lint"; then
  cat "$lint_log"
  echo "npm test: lint failed (above); no test was run" >&2
  exit 1
fi
cat "$lint_log"
echo "Running tests ($TEST_WORKERS workers)..."
if [ "$TEST_WORKERS" = 1 ]; then
  npx jest --runInBand "$@"
else
  npx jest --maxWorkers="$TEST_WORKERS" "$@"
fi
echo "PostgreSQL and Kafka are left running for the next run; 'npm run infra -- down' stops Kafka."
