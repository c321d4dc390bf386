#!/usr/bin/env bash
# `npm run test:faults`: the long fault and fuzz runs (minutes; not part of `npm test`, which runs a
# fast slice of each). Installs if needed, brings PostgreSQL and Kafka up, then runs the suites that
# search with random inputs and random fault timing, at their long settings. Extra arguments go to jest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
source scripts/test-infra.sh
export TEST_LONG=1
echo "Running the fault and fuzz suites at their long settings (test/support/search.ts)..."
# Paths (and extra arguments) before --selectProjects, which takes every word after it as a project name.
npx jest --runInBand \
  test/hostile-input-never-gets-a-5xx.e2e-spec.ts \
  test/lost-sessions-are-retried-not-5xx.e2e-spec.ts \
  test/relay-shard-locks-follow-their-owner.e2e-spec.ts \
  test/relay-isolates-a-refused-row-in-its-batch.e2e-spec.ts \
  test/relay-claims-start-past-what-it-published.e2e-spec.ts \
  test/consumer-retries-end.e2e-spec.ts \
  test/consumer-waits-out-a-database-outage.e2e-spec.ts \
  test/idempotency-matches-a-model.e2e-spec.ts \
  test/webhooks-wait-out-a-dead-receiver.e2e-spec.ts \
  test/webhook-receiver-verifies-signatures.e2e-spec.ts \
  test/history-checker-counts-nothing-lost.e2e-spec.ts \
  test/pipelined-statements-answer-in-order.e2e-spec.ts \
  test/client-never-loses-the-key-to-a-gateway-answer.e2e-spec.ts \
  test/a-nul-in-a-message-never-stalls-its-partition.e2e-spec.ts \
  test/api-key-listener-never-leaks-sessions.e2e-spec.ts \
  test/relay-order-survives-an-outage-while-isolating.e2e-spec.ts \
  test/relay-rides-out-a-stalled-broker.e2e-spec.ts \
  test/revoked-keys-stop-at-once.e2e-spec.ts \
  test/shutdown-closes-a-session-that-connects-meanwhile.e2e-spec.ts \
  test/shutdown-ends-at-its-deadline.e2e-spec.ts \
  test/webhook-timestamps-are-strict-and-hostile-strings-get-a-4xx.e2e-spec.ts \
  test/ops-refuses-stray-arguments.e2e-spec.ts \
  "$@" --selectProjects e2e
