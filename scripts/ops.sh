#!/usr/bin/env bash
# `npm run ops -- <command>`: the operator CLI. Builds first when there is no build yet.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f dist/apps/ops/src/main.js ]; then
  source scripts/ensure-deps.sh >&2
  npx nest build >&2
fi
exec node dist/apps/ops/src/main.js "$@"
