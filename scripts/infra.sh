#!/usr/bin/env bash
# The project's single infrastructure entry point: PostgreSQL and a real Kafka broker.
#
#   scripts/infra.sh up                 start what is missing (idempotent), create databases
#   scripts/infra.sh down               stop only what `up` started (never PostgreSQL)
#   scripts/infra.sh status             what runs where; exit 0 only if both answer
#   scripts/infra.sh logs [--no-follow] the broker's log
#
# Kafka runs from Docker when an engine answers (unless INFRA_USE_DOCKER=0); otherwise from
# jars fetched once with Maven into .cache/infra and started as a single-node KRaft broker
# (KAFKA_JVM_OPTS: extra options for its JVM).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="$ROOT/.cache/infra"
LIBS="$CACHE/kafka-libs"
POM="$CACHE/kafka-pom/pom.xml"
# KAFKA_STATE_DIR lets a test run a second, private broker (its own ports, data, pid and log)
# from the same cached jars; KAFKA_KEEP_DATA=1 restarts it without wiping its topics.
STATE="${KAFKA_STATE_DIR:-$CACHE}"
DATA="$STATE/kafka-data"
SERVER_PROPS="$STATE/server.properties"
LOG4J_PROPS="$STATE/log4j.properties"
PID_FILE="$STATE/kafka.pid"
KAFKA_LOG="$STATE/kafka.log"
MVN_LOG="$CACHE/mvn.log"
DOCKER_MARKER="$STATE/kafka.docker"
PG_DOCKER_MARKER="$CACHE/postgres.docker"
TEST_BROKER_STATE="$CACHE/test-broker" # the tests' own broker: scripts/test-infra.sh

KAFKA_VERSION="3.9.1"
KAFKA_JAR="$LIBS/kafka_2.13-$KAFKA_VERSION.jar"

KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
# The port clients are told to connect to (advertised.listeners): KAFKA_PORT, unless a proxy sits in
# front of the broker (test/support/kafka-fault-proxy.ts).
KAFKA_ADVERTISED_PORT="${KAFKA_ADVERTISED_PORT:-$KAFKA_PORT}"
PGHOST="${PGHOST:-127.0.0.1}"
PGPORT="${PGPORT:-5432}"
PGUSER="${PGUSER:-postgres}"
INFRA_DATABASES="${INFRA_DATABASES:-orders fulfillment notifier webhook_receiver orders_test fulfillment_test notifier_test webhook_receiver_test}"
INFRA_USE_DOCKER="${INFRA_USE_DOCKER:-1}"

# Relative paths keep the messages short and copy-pasteable from the repo root.
rel() { echo "${1#"$ROOT"/}"; }
die() { echo "infra: $*" >&2; exit 1; }

# --- small probes ------------------------------------------------------------------------

port_open() { # host port
  timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# Whether host:port speaks Kafka: an ApiVersions (v0) request must come back with its correlation id.
# A port that is open but serves something else is not a broker to use.
kafka_answers() { # host port
  local reply
  reply="$(timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2 || exit 1
    printf '\\x00\\x00\\x00\\x0f\\x00\\x12\\x00\\x00\\x00\\x00\\x00\\x01\\x00\\x05probe' >&3
    head -c 8 <&3 | od -An -tx1" 2>/dev/null | tr -d ' \n')"
  [[ "${reply:8:8}" == 00000001 ]]
}

pg_answers() {
  pg_isready -q -h "$PGHOST" -p "$PGPORT" -t 2 >/dev/null 2>&1
}

pg_is_local() {
  case "$PGHOST" in 127.0.0.1 | localhost | ::1 | /*) return 0 ;; *) return 1 ;; esac
}

# A pid file can outlive its broker (SIGKILL, reboot) and the pid can be reused by
# something else: only trust it if that pid is still our kafka.Kafka process.
kafka_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE" 2>/dev/null || true)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka' || return 1
  echo "$pid"
}

compose() {
  docker compose -f "$ROOT/docker-compose.yml" "$@"
}

# Docker is used only when an engine answers and Compose v2 (`docker compose`, which has
# `up --wait`) is installed.
docker_usable() {
  [[ "$INFRA_USE_DOCKER" != "0" ]] || return 1
  command -v docker >/dev/null 2>&1 || return 1
  docker info >/dev/null 2>&1 || return 1
  docker compose version >/dev/null 2>&1
}

wait_until() { # seconds description command...
  local limit="$1" what="$2"
  local deadline=$((SECONDS + limit))
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || { echo "infra: waited ${limit}s for $what" >&2; return 1; }
    sleep 0.5
  done
}

# --- PostgreSQL ----------------------------------------------------------------------------

pg_start() {
  if pg_is_local && [[ -d /etc/postgresql ]] && command -v pg_ctlcluster >/dev/null 2>&1; then
    local versions=(/etc/postgresql/*) version
    version="$(basename "${versions[0]}")"
    echo "PostgreSQL: not answering on $PGHOST:$PGPORT, starting cluster $version/main"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
  elif pg_is_local && docker_usable; then
    echo "PostgreSQL: not answering on $PGHOST:$PGPORT, starting it with docker compose"
    compose up -d --wait postgres >/dev/null || die "PostgreSQL: docker compose up postgres failed"
    touch "$PG_DOCKER_MARKER"
  fi
}

pg_up() {
  command -v pg_isready >/dev/null 2>&1 || die "PostgreSQL client tools (pg_isready, psql, createdb) not found"
  if ! pg_answers; then
    pg_start
    local deadline=$((SECONDS + 20))
    until pg_answers; do
      ((SECONDS < deadline)) || die "PostgreSQL is not answering on $PGHOST:$PGPORT (start it, or set PGHOST/PGPORT)"
      sleep 0.5
    done
  fi
  local db exists
  # Names go into SQL unquoted: accept plain identifiers only, and check all before creating any.
  for db in $INFRA_DATABASES; do
    [[ "$db" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "invalid database name in INFRA_DATABASES: $db"
  done
  for db in $INFRA_DATABASES; do
    exists="$(psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -v ON_ERROR_STOP=1 -tAc \
      "select 1 from pg_database where datname = '$db'")" || die "cannot query PostgreSQL as $PGUSER on $PGHOST:$PGPORT"
    if [[ "$exists" != "1" ]]; then
      createdb -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" "$db" || die "createdb $db failed"
      echo "PostgreSQL: created database $db"
    fi
  done
}

# --- Kafka from jars -----------------------------------------------------------------------

require_java() {
  command -v java >/dev/null 2>&1 || die "java not found: Kafka $KAFKA_VERSION needs Java 17 (apt-get install openjdk-17-jre-headless)"
  local major
  major="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)"
  [[ -n "$major" && "$major" -ge 17 ]] || die "java ${major:-?} found, Kafka here is run on Java 17 or newer"
}

write_pom() {
  mkdir -p "$(dirname "$POM")"
  cat >"$POM" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by scripts/infra.sh: only used to download the broker's jars. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.infra</groupId>
  <artifactId>kafka-broker-libs</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- The broker jar leaves logging to the tarball: bring a log4j 1 backend ourselves. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>1.7.36</version>
    </dependency>
    <dependency>
      <groupId>ch.qos.reload4j</groupId>
      <artifactId>reload4j</artifactId>
      <version>1.2.25</version>
    </dependency>
  </dependencies>
  <build>
    <pluginManagement>
      <plugins>
        <plugin>
          <groupId>org.apache.maven.plugins</groupId>
          <artifactId>maven-dependency-plugin</artifactId>
          <version>3.8.1</version>
        </plugin>
      </plugins>
    </pluginManagement>
  </build>
</project>
EOF
}

# First run only. Copy into a temporary directory and rename it, so an interrupted
# download never leaves a half-filled libs directory that looks complete. Brokers started side by
# side (scripts/test-infra.sh) take turns on a lock: the first fetches, the others find the jars.
fetch_jars() {
  [[ -f "$KAFKA_JAR" ]] && return 0
  mkdir -p "$CACHE"
  exec {jars_lock}>"$CACHE/kafka-libs.lock"
  flock "$jars_lock"
  if [[ -f "$KAFKA_JAR" ]]; then
    flock -u "$jars_lock"
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: it is needed once to fetch the Kafka jars (apt-get install maven)"
  echo "Kafka: fetching broker jars with Maven (first run only, log $(rel "$MVN_LOG"))"
  write_pom
  local tmp="$LIBS.tmp"
  rm -rf "$tmp"
  if ! mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
    -DoutputDirectory="$tmp" -DincludeScope=runtime >"$MVN_LOG" 2>&1; then
    tail -n 20 "$MVN_LOG" >&2
    die "Maven could not fetch the Kafka jars (full log: $(rel "$MVN_LOG"))"
  fi
  [[ -f "$tmp/kafka_2.13-$KAFKA_VERSION.jar" ]] || die "Maven finished but kafka_2.13-$KAFKA_VERSION.jar is missing (log: $(rel "$MVN_LOG"))"
  rm -rf "$LIBS"
  mv "$tmp" "$LIBS"
  flock -u "$jars_lock"
}

write_configs() {
  cat >"$SERVER_PROPS" <<EOF
# Generated by scripts/infra.sh on every start: single-node KRaft broker for development and tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
# 127.0.0.1, not localhost: localhost may resolve to ::1 and the clients would miss it.
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_ADVERTISED_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$DATA
num.partitions=1
# One broker: every internal topic has a single replica; few offsets partitions start faster.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
# Topics are created explicitly by the apps and tests (admin.createTopics).
auto.create.topics.enable=false
delete.topic.enable=true
log.retention.hours=168
EOF

  cat >"$LOG4J_PROPS" <<'EOF'
# Generated by scripts/infra.sh: everything to stdout, which the script sends to kafka.log.
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n

# Per-request and state-change chatter drowns the useful lines.
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel$=WARN
log4j.logger.kafka.network.Processor=WARN
log4j.logger.kafka.server.KafkaApis=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.org.apache.kafka.controller=INFO
log4j.logger.org.apache.kafka.raft=WARN
log4j.logger.org.apache.kafka.clients=WARN
EOF
}

# A Kafka Uuid is 16 random bytes in URL-safe base64 without padding; a leading '-' would be
# read as a command-line option, so draw again in that case.
cluster_id() {
  local id
  while :; do
    id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
    [[ "$id" != -* ]] && break
  done
  echo "$id"
}

# Tests want an empty broker: a fresh log dir on every start, formatted for a new cluster.
format_storage() {
  if [[ "${KAFKA_KEEP_DATA:-0}" == "1" && -f "$DATA/meta.properties" ]]; then
    return 0
  fi
  rm -rf "$DATA"
  mkdir -p "$DATA"
  if ! java -Dlog4j.configuration="file:$LOG4J_PROPS" -cp "$LIBS/*" kafka.tools.StorageTool \
    format -t "$(cluster_id)" -c "$SERVER_PROPS" >>"$KAFKA_LOG" 2>&1; then
    die "Kafka: formatting the log dir failed (see $(rel "$KAFKA_LOG"))"
  fi
}

broker_started() {
  grep -q 'Kafka Server started' "$KAFKA_LOG" 2>/dev/null && port_open 127.0.0.1 "$KAFKA_PORT"
}

stop_pid() { # pid: SIGTERM, then SIGKILL after 20 s
  local pid="$1" deadline=$((SECONDS + 20))
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
      sleep 0.5
      break
    fi
    sleep 0.5
  done
}

# The pid of a kafka.Kafka process listening on KAFKA_PORT that this state dir did not start.
foreign_kafka_pid() {
  command -v ss >/dev/null 2>&1 || return 1
  local pid
  pid="$(ss -ltnpH "sport = :$KAFKA_PORT" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)"
  [[ -n "$pid" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'kafka\.Kafka' || return 1
  port_open 127.0.0.1 "$KAFKA_PORT" || return 1
  echo "$pid"
}

kafka_start_jars() {
  require_java
  fetch_jars
  local port
  for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    ! port_open 127.0.0.1 "$port" || die "Kafka: port 127.0.0.1:$port is already taken by another process (see: ss -ltnp)"
  done
  write_configs
  : >"$KAFKA_LOG"
  format_storage

  # setsid + nohup: the broker gets its own session and outlives this script and its terminal.
  setsid nohup java -Xmx512m -Xms256m ${KAFKA_JVM_OPTS:-} -Dlog4j.configuration="file:$LOG4J_PROPS" \
    -cp "$LIBS/*" kafka.Kafka "$SERVER_PROPS" >>"$KAFKA_LOG" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PID_FILE"

  local deadline=$((SECONDS + 60)) reason=""
  until broker_started; do
    if ! kill -0 "$pid" 2>/dev/null; then
      reason="the broker exited during startup"
      break
    fi
    if ((SECONDS >= deadline)); then
      reason="the broker did not report 'Kafka Server started' within 60 s"
      break
    fi
    sleep 0.5
  done
  if [[ -n "$reason" ]]; then
    stop_pid "$pid"
    rm -f "$PID_FILE"
    die "Kafka: $reason (log: $(rel "$KAFKA_LOG"))"
  fi
}

kafka_start_docker() {
  echo "Kafka: starting it with docker compose"
  # --wait returns once the container's healthcheck passes.
  compose up -d --wait kafka >/dev/null || die "Kafka: docker compose up kafka failed (try: docker compose logs kafka)"
  touch "$DOCKER_MARKER"
  wait_until 60 "Kafka on 127.0.0.1:$KAFKA_PORT" port_open 127.0.0.1 "$KAFKA_PORT" ||
    die "Kafka: container started but 127.0.0.1:$KAFKA_PORT does not answer (try: docker compose logs kafka)"
}

# Whether KAFKA_BROKERS names a cluster other than the local broker this script would run.
uses_configured_cluster() {
  [[ -n "${KAFKA_BROKERS:-}" && "$KAFKA_BROKERS" != "127.0.0.1:$KAFKA_PORT" && "$KAFKA_BROKERS" != "localhost:$KAFKA_PORT" ]]
}

kafka_up() {
  mkdir -p "$CACHE" "$STATE"
  local pid
  if pid="$(kafka_pid)"; then
    if port_open 127.0.0.1 "$KAFKA_PORT"; then
      echo "Kafka: already running (pid $pid)"
      return 0
    fi
    # Ours but not serving (hung or half started): replace it rather than guess.
    echo "Kafka: pid $pid does not answer on 127.0.0.1:$KAFKA_PORT, restarting it"
    stop_pid "$pid"
  fi
  rm -f "$PID_FILE"

  # A cluster named by KAFKA_BROKERS is used as it is: nothing is started for it (docs/operations.md).
  if uses_configured_cluster; then
    local broker host port
    for broker in ${KAFKA_BROKERS//,/ }; do
      host="${broker%:*}" port="${broker##*:}"
      if kafka_answers "$host" "$port"; then
        echo "Kafka: using the cluster at $KAFKA_BROKERS (KAFKA_BROKERS; $broker answers)"
        return 0
      fi
    done
    die "Kafka: no broker of KAFKA_BROKERS=$KAFKA_BROKERS answers (unset it to run a local broker on 127.0.0.1:$KAFKA_PORT)"
  fi

  # A broker already answering on this address (another checkout's, a container, one started by hand): use it.
  if kafka_answers 127.0.0.1 "$KAFKA_PORT"; then
    if pid="$(foreign_kafka_pid)"; then
      echo "Kafka: 127.0.0.1:$KAFKA_PORT is served by a broker started elsewhere (pid $pid, $(tr '\0' ' ' <"/proc/$pid/cmdline" | grep -o '[^ ]*server.properties' || echo '?')); using it"
    else
      echo "Kafka: 127.0.0.1:$KAFKA_PORT already answers as a Kafka broker (started elsewhere); using it"
    fi
    return 0
  fi

  if docker_usable; then
    kafka_start_docker
  else
    kafka_start_jars
  fi
}

# --- subcommands ---------------------------------------------------------------------------

cmd_up() {
  pg_up
  kafka_up
  echo "PostgreSQL: $PGHOST:$PGPORT (databases: $INFRA_DATABASES)"
  local pid
  if uses_configured_cluster; then
    echo "Kafka: $KAFKA_BROKERS (KAFKA_BROKERS, started elsewhere: 'down' here leaves it running)"
  elif pid="$(kafka_pid)"; then
    echo "Kafka: 127.0.0.1:$KAFKA_PORT (pid $pid, log $(rel "$KAFKA_LOG"))"
  elif pid="$(foreign_kafka_pid)"; then
    echo "Kafka: 127.0.0.1:$KAFKA_PORT (pid $pid, started elsewhere: 'down' here leaves it running)"
  elif [[ -f "$DOCKER_MARKER" ]]; then
    echo "Kafka: 127.0.0.1:$KAFKA_PORT (docker compose service kafka, logs: scripts/infra.sh logs)"
  else
    echo "Kafka: 127.0.0.1:$KAFKA_PORT (started elsewhere: 'down' here leaves it running)"
  fi
}

cmd_down() {
  local pid stopped=0
  if pid="$(kafka_pid)"; then
    echo "Kafka: stopping pid $pid"
    stop_pid "$pid"
    stopped=1
  fi
  rm -f "$PID_FILE"
  if [[ -f "$DOCKER_MARKER" ]]; then
    if docker info >/dev/null 2>&1; then
      echo "Kafka: stopping docker compose service kafka"
      compose stop kafka >/dev/null
      stopped=1
    fi
    rm -f "$DOCKER_MARKER"
  fi
  # PostgreSQL belongs to the machine; only a container this script started is stopped.
  if [[ -f "$PG_DOCKER_MARKER" ]]; then
    if docker info >/dev/null 2>&1; then
      echo "PostgreSQL: stopping docker compose service postgres"
      compose stop postgres >/dev/null
    fi
    rm -f "$PG_DOCKER_MARKER"
  fi
  ((stopped)) || echo "Kafka: not running"
  stop_test_broker
}

# The tests' own brokers (scripts/test-infra.sh: test-broker, test-broker-<port>) go down with the project's.
stop_test_broker() {
  [[ -z "${KAFKA_STATE_DIR:-}" ]] || return 0
  local state pid
  for state in "$TEST_BROKER_STATE" "$TEST_BROKER_STATE"-*; do
    [[ -f "$state/kafka.pid" ]] || continue
    if pid="$(PID_FILE="$state/kafka.pid" kafka_pid)"; then
      echo "Kafka (tests' broker, $(basename "$state")): stopping pid $pid"
      stop_pid "$pid"
    fi
    rm -f "$state/kafka.pid"
  done
}

cmd_status() {
  local ok=0 pid
  if pg_answers; then
    echo "PostgreSQL: answering on $PGHOST:$PGPORT"
  else
    echo "PostgreSQL: NOT answering on $PGHOST:$PGPORT"
    ok=1
  fi

  local where="nothing started by scripts/infra.sh"
  if pid="$(kafka_pid)"; then
    where="pid $pid, log $(rel "$KAFKA_LOG")"
  elif [[ -f "$PID_FILE" ]]; then
    where="stale pid file: the broker died; scripts/infra.sh up restarts it"
  elif [[ -f "$DOCKER_MARKER" ]]; then
    where="docker compose service kafka"
  fi
  if port_open 127.0.0.1 "$KAFKA_PORT"; then
    echo "Kafka: answering on 127.0.0.1:$KAFKA_PORT ($where)"
  else
    echo "Kafka: NOT answering on 127.0.0.1:$KAFKA_PORT ($where)"
    ok=1
  fi
  if [[ -z "${KAFKA_STATE_DIR:-}" ]] && pid="$(PID_FILE="$TEST_BROKER_STATE/kafka.pid" kafka_pid)"; then
    echo "Kafka (tests' broker, scripts/test-infra.sh): pid $pid, log $(rel "$TEST_BROKER_STATE/kafka.log")"
  fi
  return "$ok"
}

cmd_logs() {
  local follow=1
  case "${1:-}" in
    "") ;;
    --no-follow) follow=0 ;;
    *) usage ;;
  esac
  if [[ -f "$DOCKER_MARKER" ]] && ! kafka_pid >/dev/null; then
    if ((follow)); then compose logs -f --tail 100 kafka; else compose logs --tail 100 kafka; fi
    return
  fi
  [[ -f "$KAFKA_LOG" ]] || die "no Kafka log yet ($(rel "$KAFKA_LOG")); run: scripts/infra.sh up"
  if ((follow)); then tail -n 100 -f "$KAFKA_LOG"; else tail -n 100 "$KAFKA_LOG"; fi
}

usage() {
  echo "usage: scripts/infra.sh up | down | status | logs [--no-follow]" >&2
  exit 2
}

main() {
  local cmd="${1:-}"
  shift || true
  case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    status) cmd_status "$@" ;;
    logs) cmd_logs "$@" ;;
    *) usage ;;
  esac
}

main "$@"
