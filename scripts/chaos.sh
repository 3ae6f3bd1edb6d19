#!/usr/bin/env bash
# The fault trials (issue 27) in a bounded form: runs the Go tests gated by
# CLAIMCHECK_TEST_CHAOS=1 and prints their table, one row per trial:
#
#   trial | jobs | lost | duplicate handler runs | dead | secs to recover
#
# from the CHAOS|<trial>|<jobs>|<lost>|<dups>|<dead>|<secs> lines the
# tests print. Each trial counts handler runs in the handler itself.
# Bounded to 10 minutes (go test -timeout); exit status is go test's.
#
# Trials today:
#   postgres-kill9-river  a private PostgreSQL cluster (initdb'd by the
#                         test, internal/testenv.PrivatePG) killed -9 five
#                         times for 20-30 s each (longer than the test's
#                         4 s lease) while 100 jobs with results over
#                         64 KiB flow (pipeline.TestChaosPostgresKilled).
#
# Needs: PostgreSQL server binaries (/usr/lib/postgresql/*/bin, or PG_BIN);
# as root, a postgres OS user. Example:
#   scripts/chaos.sh            # all trials
#   scripts/chaos.sh -run TestChaosPostgresKilled
set -euo pipefail
cd "$(dirname "$0")/.."
run=(-run 'TestChaos')
if [ $# -gt 0 ]; then run=("$@"); fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
status=0
CLAIMCHECK_TEST_CHAOS=1 go test -race -count=1 -timeout 10m -v "${run[@]}" ./pipeline/... >"$log" 2>&1 || status=$?
grep -E '^(--- (FAIL|PASS)|FAIL|ok )' "$log" || true
if [ "$status" -ne 0 ]; then
	grep -E 'chaos_test.go|panic' "$log" | tail -40 || true
fi
echo
printf '%-24s %6s %6s %6s %6s %8s\n' trial jobs lost dups dead recover_s
grep '^CHAOS|' "$log" | while IFS='|' read -r _ trial jobs lost dups dead secs; do
	printf '%-24s %6s %6s %6s %6s %8s\n' "$trial" "$jobs" "$lost" "$dups" "$dead" "$secs"
done
echo "chaos phase: $(( $(date +%s) - start )) s, go test exit $status"
exit "$status"
