#!/usr/bin/env bash
# `npm run bench`: the benchmarks, each a ratio to a baseline measured in the same run.
#   npm run bench                      both, one after the other
#   npm run bench -- commands [args]   the command path (bench/command-path.bench.ts; PostgreSQL only):
#                                      --requests N, --concurrency N, --json
#   npm run bench -- webhooks [args]   webhook delivery (bench/webhooks.bench.ts; PostgreSQL and the
#                                      tests' Kafka broker): --deliveries N, --rate N, --seconds N, --json
#   npm run bench -- relay [args]      the outbox relay vs a bare kafkajs producer (bench/relay.bench.ts;
#                                      PostgreSQL and the tests' Kafka broker): --rows N, --rounds N,
#                                      --instances 1,2,4, --pile N, --no-peer, --json, --profile out.svg
#   npm run bench -- consumers [args]  consumers draining a backlog (bench/consumers.bench.ts; PostgreSQL and
#                                      the tests' broker): --events N, --rounds N, --no-notifier, --json,
#                                      --profile <fulfillment.svg>
#   npm run bench -- latency [args]    order commit -> fulfillment effect with the whole chain running
#                                      (bench/latency.bench.ts; PostgreSQL and the tests' broker): --rate N,
#                                      --seconds N, --notifier, --json
# Each runs the apps it measures on databases of its own (bench_*, dropped and recreated each run).
# Exit 1 on any unexpected reply or lost webhook, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh >&2
PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}"
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h "$PGHOST" -p "$PGPORT" -t 3 >/dev/null 2>&1; then
  echo "bench: PostgreSQL is not answering on $PGHOST:$PGPORT (start it with: npm run infra -- up)" >&2
  exit 1
fi
node_ts=(node -r ts-node/register/transpile-only -r tsconfig-paths/register)
which="${1:-all}"
case "$which" in
  commands) shift; exec "${node_ts[@]}" bench/command-path.bench.ts "$@" ;;
  webhooks) shift; source scripts/test-infra.sh >&2; exec "${node_ts[@]}" bench/webhooks.bench.ts "$@" ;;
  relay) shift; source scripts/test-infra.sh >&2; exec "${node_ts[@]}" bench/relay.bench.ts "$@" ;;
  consumers) shift; source scripts/test-infra.sh >&2; exec "${node_ts[@]}" bench/consumers.bench.ts "$@" ;;
  latency) shift; source scripts/test-infra.sh >&2; exec "${node_ts[@]}" bench/latency.bench.ts "$@" ;;
  all) [ $# -gt 0 ] && shift ;;
  -*) ;; # options without a name: the command path, as before
  *) echo "bench: unknown benchmark \"$which\" (commands, webhooks, consumers, latency, relay, or none for commands and webhooks)" >&2; exit 2 ;;
esac
if [[ "$which" == -* ]]; then exec "${node_ts[@]}" bench/command-path.bench.ts "$@"; fi
"${node_ts[@]}" bench/command-path.bench.ts
source scripts/test-infra.sh >&2
"${node_ts[@]}" bench/webhooks.bench.ts
