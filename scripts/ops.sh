#!/usr/bin/env bash
# `npm run ops -- <command>`: the operator CLI. Builds first when there is no build yet or the
# sources changed since the last one, so an operator never runs yesterday's code.
set -euo pipefail
cd "$(dirname "$0")/.."
entry=dist/apps/ops/src/main.js
if [ ! -f "$entry" ] || [ -n "$(find apps libs package-lock.json -newer "$entry" -name '*.ts' -o -newer "$entry" -name package-lock.json 2>/dev/null | head -n 1)" ]; then
  source scripts/ensure-deps.sh >&2
  npx nest build >&2
fi
exec node "$entry" "$@"
