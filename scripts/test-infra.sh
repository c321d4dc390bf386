# Sourced by scripts/test.sh and scripts/test-faults.sh: PostgreSQL plus Kafka brokers of the tests'
# own, one per jest worker (TEST_WORKERS, default 1): the first on 29092 (state in
# .cache/infra/test-broker), worker n's on 29092 + 2(n-1) (state in test-broker-<port>), exported as
# TEST_KAFKA_BROKERS and TEST_KAFKA_BROKERS_<n> (test/support/test-env.ts). The tests never touch the
# broker `npm start` uses (9092), so a run of the suite leaves nothing on the topics the running apps
# consume, and the two can run side by side. `npm run infra -- down` stops every broker.
# TEST_KAFKA_PORT moves the first broker (and the others after it); TEST_KAFKA_BROKERS names a broker
# or cluster to test against instead (used as it is, nothing started; one worker).
TEST_KAFKA_PORT="${TEST_KAFKA_PORT:-29092}"
TEST_WORKERS="${TEST_WORKERS:-1}"
[ -z "${TEST_KAFKA_BROKERS:-}" ] || TEST_WORKERS=1

# A test broker lives for one run and serves little traffic: the JVM's quick compiler alone and the
# serial collector start it and serve the suites with about a third less CPU (4.3 -> 2.9 s to start,
# measured here), which the suites' own processes get instead. Exported: the private brokers some
# suites start (test/support/test-broker.ts) take it too. Set (even empty), it is used as it is.
export KAFKA_JVM_OPTS="${KAFKA_JVM_OPTS--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"

start_test_broker() { # port [cluster]
  local state="$PWD/.cache/infra/test-broker"
  [ "$1" = 29092 ] || state="$state-$1"
  KAFKA_BROKERS="${2:-}" KAFKA_STATE_DIR="$state" KAFKA_PORT="$1" \
    KAFKA_CONTROLLER_PORT="$(($1 + 1))" INFRA_USE_DOCKER=0 bash scripts/infra.sh up
}

start_test_broker "$TEST_KAFKA_PORT" "${TEST_KAFKA_BROKERS:-}"
export TEST_KAFKA_BROKERS="${TEST_KAFKA_BROKERS:-127.0.0.1:$TEST_KAFKA_PORT}"
# The other workers' brokers start side by side: the first fetched the jars and made the databases.
starting=()
for ((worker = 2; worker <= TEST_WORKERS; worker++)); do
  port=$((TEST_KAFKA_PORT + 2 * (worker - 1)))
  start_test_broker "$port" &
  starting+=($!)
  export "TEST_KAFKA_BROKERS_$worker=127.0.0.1:$port"
done
for pid in "${starting[@]}"; do
  wait "$pid" || { echo "test-infra: a test broker did not start (above)" >&2; return 1; }
done
