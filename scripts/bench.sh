#!/usr/bin/env bash
# `npm run bench`: throughput and latency of the command path against a command-api it starts from
# source on its own database (bench_orders, dropped and recreated each run). Needs PostgreSQL, not
# Kafka. Arguments go to the bench (--requests N, --concurrency N, --json); exit 1 on any unexpected reply.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh >&2
PGHOST="${PGHOST:-127.0.0.1}" PGPORT="${PGPORT:-5432}"
if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h "$PGHOST" -p "$PGPORT" -t 3 >/dev/null 2>&1; then
  echo "bench: PostgreSQL is not answering on $PGHOST:$PGPORT (start it with: npm run infra -- up)" >&2
  exit 1
fi
exec node -r ts-node/register/transpile-only -r tsconfig-paths/register bench/command-path.bench.ts "$@"
