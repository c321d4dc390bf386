#!/usr/bin/env bash
# `npm start`: install if needed, bring PostgreSQL and Kafka up, migrate, build, then run every
# app until Ctrl-C. Logs are JSON, one file per app under .cache/logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-deps.sh
bash scripts/infra.sh up
echo "Building..."
npx nest build
node dist/apps/ops/src/main.js db:migrate

apps=(command-api outbox-relay fulfillment notifier webhook-receiver)
declare -A ports=([command-api]="${COMMAND_API_PORT:-3000}" [outbox-relay]="${OUTBOX_RELAY_PORT:-3001}" [fulfillment]="${FULFILLMENT_PORT:-3002}" [notifier]="${NOTIFIER_PORT:-3003}" [webhook-receiver]="${WEBHOOK_RECEIVER_PORT:-3004}")
# The notifier signs every order event's webhook and POSTs it to the reference receiver
# (apps/webhook-receiver), which verifies and stores it: both use the development secret here.
# Point WEBHOOK_URL (and WEBHOOK_SECRET) at your own receiver instead (docs/notifier.md).
export WEBHOOK_URL="${WEBHOOK_URL:-http://127.0.0.1:${ports[webhook-receiver]}/webhooks/orders}"
# No test-only switch is on here (FAULT_INJECTION, CRASH_AFTER_DATABASE_COMMIT need NODE_ENV=test):
# `npm run demo` starts a command-api of its own with fault injection for the one finding that needs it.
host="${HOST:-127.0.0.1}"
# Each app serves /metrics and /docs on its own management port (3100-3104 by default): one
# MANAGEMENT_PORT for all five would collide on this one host.
unset MANAGEMENT_PORT
logs=.cache/logs
mkdir -p "$logs"
pids=()

stop_apps() {
  trap - INT TERM EXIT
  echo
  echo "Stopping apps..."
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  echo "Apps stopped. PostgreSQL and Kafka keep running; 'npm run infra -- down' stops Kafka."
}
trap 'stop_apps; exit 0' INT TERM
trap stop_apps EXIT

for app in "${apps[@]}"; do
  node "dist/apps/$app/src/main.js" >"$logs/$app.log" 2>&1 &
  pids+=($!)
done

for app in "${apps[@]}"; do
  url="http://$host:${ports[$app]}"
  for _ in $(seq 1 150); do
    curl -fsS -o /dev/null "$url/health/live" 2>/dev/null && break
    sleep 0.2
  done
  if ! curl -fsS -o /dev/null "$url/health/live" 2>/dev/null; then
    echo "$app did not come up on $url; last lines of $logs/$app.log:" >&2
    tail -n 20 "$logs/$app.log" >&2
    exit 1
  fi
done

api="http://$host:${ports[command-api]}"
# A demo client for the sample request, kept across runs while its key still authenticates.
key_file=.cache/demo-api-key
if [ ! -s "$key_file" ] || [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$key_file")" "$api/v1/idempotency-receipts/orders.create/probe")" = 401 ]; then
  node dist/apps/ops/src/main.js clients:create --tenant demo --name "npm start demo" --json \
    | node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(0, "utf8")).apiKey)' >"$key_file"
fi
demo_key=$(cat "$key_file")
demo_idempotency_key="demo-$(date +%s)"

cat <<MSG

Running:
  command-api   $api        (OpenAPI: http://$host:3100/docs; every app's /metrics on its port + 100)
  outbox-relay  http://$host:${ports[outbox-relay]}
  fulfillment   http://$host:${ports[fulfillment]}
  notifier      http://$host:${ports[notifier]}     (signed webhooks to $WEBHOOK_URL)
  webhook-receiver http://$host:${ports[webhook-receiver]}  (the reference receiver: verifies, dedupes, stores)
Logs: $logs/<app>.log (JSON; pipe through 'npx pino-pretty' to read)

Try (a demo client of tenant "demo"; its key is kept in $key_file):
  curl -si -X POST $api/v1/orders \\
    -H "Authorization: Bearer $demo_key" \\
    -H "Idempotency-Key: $demo_idempotency_key" \\
    -H "Content-Type: application/json" \\
    -d '{"sku":"SKU-1","quantity":2}'
Send it twice: the second answer is the stored one (Idempotent-Replayed: true), and no second order
exists. Change the quantity and keep the key: 422. A new key is a new order.
More clients: npm run ops -- clients:create --tenant <id>
The whole experiment, end to end, in another terminal: npm run demo

Ctrl-C stops the apps.
MSG
# Return as soon as any app exits, so a crash is not hidden behind the others.
wait -n "${pids[@]}"
echo "An app exited; see $logs/." >&2
exit 1
