#!/usr/bin/env bash
# One producer and two worker processes on PostgreSQL + an S3 store: submits
# N generated payloads (default 1000: 90% small enough to travel inline,
# 10% offloaded), works them with two `claimcheck work` processes, then
# checks in SQL that every job completed exactly once on its first attempt
# and that the claims registry agrees with the jobs.
#
# Needs: CLAIMCHECK_DATABASE=postgres://... (a database of its own, created
# empty), CLAIMCHECK_STORE=s3://... (or file:///...), AWS credentials in the
# environment for S3, psql. Example on a development machine:
#   scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"
#   psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE claimcheck_3proc'
#   CLAIMCHECK_DATABASE='postgres://postgres@127.0.0.1:5432/claimcheck_3proc?sslmode=disable' \
#   CLAIMCHECK_STORE="$CLAIMCHECK_TEST_S3_URL" scripts/three-process.sh 1000
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
: "${CLAIMCHECK_DATABASE:?set CLAIMCHECK_DATABASE to a postgres:// URL}"
: "${CLAIMCHECK_STORE:?set CLAIMCHECK_STORE to an s3:// or file:// URL}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
export CLAIMCHECK_KEEPER="base64key://$(head -c 32 /dev/urandom | base64 | tr '+/' '-_')"
export CLAIMCHECK_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
go build -o "$work/claimcheck" ./cmd/claimcheck
cc="$work/claimcheck"
mkdir -p "$work/in"
for i in $(seq 1 "$n"); do
  if (( i % 10 == 0 )); then size=70000; else size=$(( (i * 37) % 4000 + 1 )); fi
  head -c "$size" /dev/urandom > "$work/in/$i.bin"
done
"$cc" --data "$work/p" migrate
for w in 1 2; do
  "$cc" --data "$work/w$w" work --kind checksum --concurrency 4 --exec -- \
    sh -c "echo \$CLAIMCHECK_JOB_ID >> $work/w$w.ids; sha256sum" >"$work/w$w.out" 2>"$work/w$w.err" &
done
start=$(date +%s)
for f in "$work"/in/*.bin; do "$cc" --data "$work/p" submit --kind checksum --tenant acme "$f" >/dev/null; done
echo "submitted $n jobs in $(( $(date +%s) - start )) s"
pending() { "$cc" --data "$work/p" jobs --json --kind checksum | grep -cE '"state": ?"(available|running|retryable|scheduled|pending)"' || true; }
for _ in $(seq 600); do [ "$(pending)" = 0 ] && break; sleep 1; done
kill -INT $(jobs -p); wait || true
cat "$work"/w1.out "$work"/w2.out
echo "handler invocations: $(cat "$work"/w*.ids | wc -l), distinct job ids: $(sort -u "$work"/w*.ids | wc -l)"
psql "${CLAIMCHECK_DATABASE%%\?*}" -c "SELECT state, attempt, count(*) AS jobs FROM river_job GROUP BY state, attempt ORDER BY 1, 2" \
  -c "SELECT count(*) AS jobs,
       count(*) FILTER (WHERE args->'ticket' ? 'key') AS offloaded_jobs,
       (SELECT count(*) FROM claimcheck_claim WHERE role = 'payload') AS payload_rows,
       count(*) FILTER (WHERE args->'ticket' ? 'key' AND NOT EXISTS (SELECT 1 FROM claimcheck_claim c
           WHERE c.job_id = j.id AND c.role = 'payload' AND c.object_key = j.args->'ticket'->>'key')) AS offloaded_without_row,
       count(*) FILTER (WHERE metadata->'output'->>'result' IS NULL) AS without_result
     FROM river_job j"
