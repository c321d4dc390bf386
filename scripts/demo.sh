#!/usr/bin/env bash
# `npm run demo`: drives the reference experiment against the service `npm start` runs (start it
# first, in another terminal). Prints one line per finding; exit 1 when one does not hold.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh >&2
exec node -r ts-node/register/transpile-only -r tsconfig-paths/register test/demo/run-demo.ts "$@"
