#!/usr/bin/env bash
# `npm test`: install if needed, check lint and format, bring PostgreSQL and Kafka up, then run every test
# (unit specs, then the end-to-end suites against the real servers). Extra arguments go to jest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
echo "Checking lint, format and unused code (npm run lint)..."
npm run --silent lint
source scripts/test-infra.sh
echo "Running tests..."
npx jest --runInBand "$@"
echo "PostgreSQL and Kafka are left running for the next run; 'npm run infra -- down' stops Kafka."
