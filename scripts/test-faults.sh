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
# Every suite that searches (it imports test/support/search.ts), so that a new one is never left out.
# Paths (and extra arguments) before --selectProjects, which takes every word after it as a project name.
mapfile -t suites < <(grep -l "from './support/search'" test/*.e2e-spec.ts)
echo "${#suites[@]} suites: ${suites[*]#test/}"
npx jest --runInBand "${suites[@]}" "$@" --selectProjects e2e
