#!/usr/bin/env bash
# The fault trials (issue 27, docs/chaos.md) in a bounded form: runs the Go
# tests named TestChaos* of ./pipeline and ./internal/cli, gated by
# CLAIMCHECK_TEST_CHAOS=1, and prints their table, one row per trial:
#
#   trial | jobs | lost | duplicate handler runs | dead | secs to recover
#
# from the CHAOS|<trial>|<jobs>|<lost>|<dups>|<dead>|<secs> lines the
# tests print. Each trial counts handler runs in the handler itself.
# Bounded to 10 minutes (go test -timeout). Exits 1 when a test fails or a
# row has a lost job or a duplicate handler run, else 0.
#
# Trials (docs/chaos.md says what each does and checks):
#   postgres-kill9-river     private PostgreSQL killed -9 five times (pipeline)
#   worker-kill9-*           claimcheck work processes killed -9 (SQLite, PostgreSQL)
#   sigterm-drain-*          SIGTERM to a worker mid-job (SQLite, PostgreSQL)
#   s3-cut-*, s3-blackhole-* the S3 store away for CLAIMCHECK_TEST_CHAOS_OUTAGE (20s)
#   idempotency-*            8 producers, one idempotency key (SQLite, PostgreSQL)
#   enospc                   the store on a full 2 MiB tmpfs (root)
#   lost-key-*               the key file removed after sealed submits
#
# Needs: PostgreSQL server binaries (/usr/lib/postgresql/*/bin, or PG_BIN)
# and, as root, a postgres OS user; the test services
# CLAIMCHECK_TEST_DATABASE_URL (a PostgreSQL server) and
# CLAIMCHECK_TEST_S3_URL (eval "$(scripts/seaweedfs.sh env)"). Example:
#   scripts/chaos.sh                              # all trials
#   scripts/chaos.sh -run TestChaosPostgresKilled # one
set -euo pipefail
cd "$(dirname "$0")/.."
run=(-run 'TestChaos')
if [ $# -gt 0 ]; then run=("$@"); fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
status=0
CLAIMCHECK_TEST_CHAOS=1 go test -race -count=1 -timeout 10m -v "${run[@]}" ./pipeline ./internal/cli >"$log" 2>&1 || status=$?
grep -E '^(--- (FAIL|PASS|SKIP)|FAIL|ok )' "$log" || true
if [ "$status" -ne 0 ]; then
	# The tests' messages with their continuation lines (a failed
	# process's output follows its message), the last 200 lines of them.
	awk '/^[[:space:]]+[a-z_0-9]+_test\.go:[0-9]+: |panic/ { on = 1; print; next }
		on && /^[[:space:]]/ && !/^[[:space:]]*(---|===) / { print; next }
		{ on = 0 }' "$log" | tail -200 || true
fi
echo
printf '%-24s %6s %6s %6s %6s %8s\n' trial jobs lost dups dead recover_s
bad=0
while IFS='|' read -r _ trial jobs lost dups dead secs; do
	printf '%-24s %6s %6s %6s %6s %8s\n' "$trial" "$jobs" "$lost" "$dups" "$dead" "$secs"
	if [ "$lost" != 0 ] || [ "$dups" != 0 ]; then bad=1; fi
done < <(grep '^CHAOS|' "$log")
echo "chaos phase: $(( $(date +%s) - start )) s, go test exit $status"
if [ "$status" -ne 0 ] || [ "$bad" -ne 0 ]; then
	[ "$bad" -ne 0 ] && echo "chaos: a trial lost a job or ran a handler twice"
	exit 1
fi
