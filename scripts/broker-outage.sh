#!/usr/bin/env bash
# RabbitMQ stopped while N jobs (default 500) are being enqueued, then
# restarted: every job must be delivered and processed, none lost, none
# processed twice.
#
# One worker process (`work --broker`, which relays the outbox and consumes)
# runs throughout. A producer submits N payloads, one process each, through
# the outbox. After 30% of them the RabbitMQ node is stopped (rabbitmqctl
# stop); the next 40% are submitted while it is down (they wait in the
# outbox); then it is started again (rabbitmq-server -detached) and the rest
# are submitted. The script then waits for the handler log to hold N ids
# and checks, with SQL and rabbitmqctl, that:
#   - the handler ran N times for N distinct job ids;
#   - the inbox holds N acked messages, the outbox N sent entries;
#   - the queue and its dead-letter queue are empty.
#
# Needs: a local RabbitMQ this script may stop and start (do not run it
# while other tests use the broker), PostgreSQL (producer and worker are
# separate processes), psql. Example:
#   CLAIMCHECK_TEST_DATABASE_URL='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable' scripts/broker-outage.sh 500
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}
: "${CLAIMCHECK_TEST_DATABASE_URL:?set CLAIMCHECK_TEST_DATABASE_URL to a postgres:// URL of a server where this script may create a database}"
amqp=${CLAIMCHECK_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/}
work=$(mktemp -d)
db="cc_outage_$(date +%s)"
queue="cc-outage-$(date +%s)"
worker=""
cleanup() {
  [ -n "$worker" ] && kill "$worker" 2>/dev/null || true
  if ! rabbitmqctl await_startup >/dev/null 2>&1; then
    rabbitmq-server -detached >/dev/null 2>&1 || true
    for _ in $(seq 60); do rabbitmqctl await_startup >/dev/null 2>&1 && break; sleep 1; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
psql "$CLAIMCHECK_TEST_DATABASE_URL" -qc "CREATE DATABASE $db" >/dev/null
export CLAIMCHECK_DATABASE="${CLAIMCHECK_TEST_DATABASE_URL%%\?*}"
export CLAIMCHECK_DATABASE="${CLAIMCHECK_DATABASE%/*}/$db?sslmode=disable"
export CLAIMCHECK_DATA="$work/data" CLAIMCHECK_BROKER="${amqp%/}/?queue=$queue"
go build -o "$work/claimcheck" ./cmd/claimcheck
cc="$work/claimcheck"
"$cc" migrate >/dev/null
"$cc" work --kind outage --concurrency 4 --exec -- \
  sh -c "echo \$CLAIMCHECK_JOB_ID >> $work/handled.ids; sha256sum" >"$work/worker.out" 2>"$work/worker.err" &
worker=$!
sleep 2
down_at=$(( n * 3 / 10 )); up_at=$(( n * 7 / 10 ))
start=$(date +%s)
for i in $(seq 1 "$n"); do
  if (( i == down_at )); then
    rabbitmqctl stop >/dev/null 2>&1
    echo "RabbitMQ stopped after $((i - 1)) submits"
  fi
  if (( i == up_at )); then
    rabbitmq-server -detached >/dev/null 2>&1
    for _ in $(seq 60); do rabbitmqctl await_startup >/dev/null 2>&1 && break; sleep 1; done
    echo "RabbitMQ started again after $((i - 1)) submits"
  fi
  head -c 100000 /dev/urandom > "$work/p.bin"
  "$cc" submit --kind outage --tenant acme "$work/p.bin" >/dev/null 2>>"$work/submit.err"
done
echo "submitted $n jobs in $(( $(date +%s) - start )) s"
for _ in $(seq 300); do
  [ "$(wc -l < "$work/handled.ids" 2>/dev/null || echo 0)" -ge "$n" ] && break
  sleep 1
done
sleep 10 # give a duplicate time to show
kill -INT "$worker"; wait "$worker" || true; worker=""
echo "all handled $(( $(date +%s) - start )) s after the first submit"
echo "worker: $(tail -n 1 "$work/worker.out")"
echo "worker notices: $(grep -c . "$work/worker.err" || true) lines; first: $(head -n 1 "$work/worker.err")"
echo "submits that left their job in the outbox: $(grep -c 'kept in the outbox\|not all of the outbox' "$work/submit.err" || true)"
handled=$(wc -l < "$work/handled.ids"); distinct=$(sort -u "$work/handled.ids" | wc -l)
echo "handler runs: $handled, distinct job ids: $distinct"
q() { psql "$CLAIMCHECK_DATABASE" -Atc "$1"; }
echo "inbox: $(q "SELECT action || '=' || count(*) FROM claimcheck_consumed GROUP BY action" | tr '\n' ' ')"
echo "outbox: $(q "SELECT state || '=' || count(*) FROM river_job WHERE queue LIKE 'claimcheck-outbox-%' GROUP BY state" | tr '\n' ' ')"
queues=$(rabbitmqctl list_queues -q name messages | grep "$queue" || true)
echo "queues:"; echo "$queues"
fail=0
[ "$handled" -eq "$n" ] && [ "$distinct" -eq "$n" ] || { echo "FAIL: handler runs $handled, distinct $distinct, want $n"; fail=1; }
[ "$(q "SELECT count(*) FROM claimcheck_consumed WHERE action = 'acked'")" -eq "$n" ] || { echo "FAIL: inbox"; fail=1; }
[ "$(q "SELECT count(*) FROM river_job WHERE queue LIKE 'claimcheck-outbox-%' AND state = 'completed'")" -eq "$n" ] || { echo "FAIL: outbox"; fail=1; }
echo "$queues" | awk '$2 != 0 { bad = 1 } END { exit bad }' || { echo "FAIL: messages left in a queue"; fail=1; }
"$cc" relay --until-empty >/dev/null 2>&1 || true
psql "$CLAIMCHECK_TEST_DATABASE_URL" -qc "DROP DATABASE $db" >/dev/null 2>&1 || true
[ "$fail" = 0 ] && echo "PASS: $n jobs through a RabbitMQ outage, each processed once"
exit "$fail"
