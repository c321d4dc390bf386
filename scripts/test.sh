#!/usr/bin/env bash
# `npm test`: install if needed, check lint and format, bring PostgreSQL and Kafka up, then run every test
# (unit specs, then the end-to-end suites against the real servers). Extra arguments go to jest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
echo "Checking types, lint, format and unused code (npm run lint)..."
npm run --silent lint
# Two jest workers, each with its own databases and broker (test/support/test-env.ts): the suites
# mostly wait on servers, so two at a time nearly halve the run on two cores. TEST_WORKERS=1 runs them one by one.
export TEST_WORKERS="${TEST_WORKERS:-2}"
source scripts/test-infra.sh
echo "Running tests ($TEST_WORKERS workers)..."
if [ "$TEST_WORKERS" = 1 ]; then
  npx jest --runInBand "$@"
else
  npx jest --maxWorkers="$TEST_WORKERS" "$@"
fi
echo "PostgreSQL and Kafka are left running for the next run; 'npm run infra -- down' stops Kafka."
