#!/usr/bin/env bash
# `npm run bench`: the benchmarks, each a ratio to a baseline measured in the same run (bench/main.ts).
#   npm run bench                      every benchmark with its default sizes, then docs/benchmarks.md
#                                      and docs/benchmarks/*.svg are written from the results (~15 min)
#   npm run bench -- <name> [flags]    one benchmark, its table printed (--json: its full report);
#                                      `npm run bench -- <name> --help` lists its flags.
#                                      Names: commands, relay, consumers, latency, webhooks
# Each runs the apps it measures on databases of its own (bench_*, dropped and recreated each run) and,
# where Kafka is involved, on a broker of the bench's own (127.0.0.1:29192, BENCH_KAFKA_PORT; started
# by scripts/test-infra.sh) with the JVM's default settings: the tests' brokers run a lighter JVM
# setup, and a broker left by a test run never shapes a measurement. Never part of `npm test`.
# Exit 1 on anything lost, duplicated or unexpected, 2 on bad usage.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh >&2
PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}"
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h "$PGHOST" -p "$PGPORT" -t 3 >/dev/null 2>&1; then
  echo "bench: PostgreSQL is not answering on $PGHOST:$PGPORT (start it with: npm run infra -- up)" >&2
  exit 1
fi
export TEST_KAFKA_PORT="${BENCH_KAFKA_PORT:-29192}" KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS:-}"
case "${1:-all}" in
  all | relay | consumers | latency | webhooks) source scripts/test-infra.sh >&2 ;; # and Kafka
  *) ;; # commands: PostgreSQL only; anything else is refused by bench/main.ts
esac
exec node -r ts-node/register/transpile-only -r tsconfig-paths/register bench/main.ts "$@"
