#!/usr/bin/env bash
# `npm run lint` (part of `npm test`): types, lint rules, formatting and unused code. The four checks are
# independent, so they run side by side (about 25 s instead of 40 on two cores); each failing check
# prints its own output, and the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PATH="$PWD/node_modules/.bin:$PATH"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

checks=(types eslint prettier knip)
run() { # name command...
  local name="$1"
  shift
  "$@" >"$out/$name.log" 2>&1
  echo $? >"$out/$name.status"
}
run types tsc -p tsconfig.json --noEmit &
run eslint eslint . &
run prettier prettier --check --log-level warn . &
run knip knip &
wait

failed=()
for name in "${checks[@]}"; do
  if [ "$(cat "$out/$name.status")" != 0 ]; then
    failed+=("$name")
    echo "--- $name ---"
    cat "$out/$name.log"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "lint: failed: ${failed[*]} (npm run format fixes formatting)" >&2
  exit 1
fi
echo "lint: types, lint rules, formatting and unused code all pass"
