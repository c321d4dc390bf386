# Sourced by scripts/test.sh and scripts/test-faults.sh: PostgreSQL plus a Kafka broker of the tests'
# own (port 29092, state in .cache/infra/test-broker; another TEST_KAFKA_PORT gets test-broker-<port>). The tests never touch the broker `npm start`
# uses (9092), so a run of the suite leaves nothing on the topics the running apps consume, and the
# two can run side by side. `npm run infra -- down` stops both brokers.
TEST_KAFKA_PORT="${TEST_KAFKA_PORT:-29092}"
TEST_KAFKA_STATE="$PWD/.cache/infra/test-broker"
[ "$TEST_KAFKA_PORT" = 29092 ] || TEST_KAFKA_STATE="$TEST_KAFKA_STATE-$TEST_KAFKA_PORT"
# TEST_KAFKA_BROKERS names a broker or cluster to test against instead (used as it is, nothing started).
KAFKA_BROKERS="${TEST_KAFKA_BROKERS:-}" KAFKA_STATE_DIR="$TEST_KAFKA_STATE" KAFKA_PORT="$TEST_KAFKA_PORT" \
  KAFKA_CONTROLLER_PORT="$((TEST_KAFKA_PORT + 1))" INFRA_USE_DOCKER=0 bash scripts/infra.sh up
export TEST_KAFKA_BROKERS="${TEST_KAFKA_BROKERS:-127.0.0.1:$TEST_KAFKA_PORT}"
