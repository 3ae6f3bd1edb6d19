#!/usr/bin/env bash
# A Cloud Storage emulator for the gs:// store tests: fake-gcs-server
# (github.com/fsouza/fake-gcs-server), on 127.0.0.1 only, plain HTTP,
# objects in memory.
#
#   scripts/fake-gcs.sh build   go install it into $CLAIMCHECK_CACHE/bin
#                               (default ~/.cache/claimcheck/bin) unless the
#                               pinned version is there (~2-4 min)
#   scripts/fake-gcs.sh start   start it and create the test bucket; log in
#                               $CLAIMCHECK_GCS_RUN_DIR
#   scripts/fake-gcs.sh stop    stop what this script started (its objects go)
#   scripts/fake-gcs.sh env     print the export lines the tests need:
#                               eval "$(scripts/fake-gcs.sh env)"
#   scripts/fake-gcs.sh status  say whether it runs
#
# gocloud's gcsblob talks to it when STORAGE_EMULATOR_HOST is set (and then
# sends no credentials). Its defaults are changed here: -host 0.0.0.0 →
# 127.0.0.1, -scheme https → http, -backend filesystem (/storage) → memory,
# -public-host storage.googleapis.com → this address (so upload URLs it
# hands back point at it).
#
# Settings (environment, all optional):
#   CLAIMCHECK_CACHE        cache (default ~/.cache/claimcheck)
#   CLAIMCHECK_GCS_RUN_DIR  log (default ${TMPDIR:-/tmp}/claimcheck-fake-gcs)
#   CLAIMCHECK_GCS_PORT     port on 127.0.0.1 (default 14443)
#   CLAIMCHECK_GCS_BUCKET   test bucket (default claimcheck-test)
set -euo pipefail
NAME=fake-gcs
RUN_DIR=${CLAIMCHECK_GCS_RUN_DIR:-${TMPDIR:-/tmp}/claimcheck-fake-gcs}
PORT=${CLAIMCHECK_GCS_PORT:-14443}
BUCKET=${CLAIMCHECK_GCS_BUCKET:-claimcheck-test}
# shellcheck source=emulator-lib.sh
. "$(dirname "$0")/emulator-lib.sh"

FAKE_GCS_MODULE=github.com/fsouza/fake-gcs-server@v1.56.1
BIN=$CACHE/bin/fake-gcs-server

cmd_build() { go_install "$BIN" "$FAKE_GCS_MODULE"; echo "$NAME.sh: $BIN is $FAKE_GCS_MODULE"; }

gcs_answers() {
	curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://$HOST:$PORT/storage/v1/b" 2>/dev/null | grep -q '^200$'
}

cmd_start() {
	[[ -x $BIN ]] || die "no $BIN: run '$0 build' first"
	already_running && return
	check_port_free
	launch "$BIN" -host "$HOST" -port "$PORT" -scheme http -backend memory \
		-public-host "$HOST:$PORT" -external-url "http://$HOST:$PORT" -log-level warn
	wait_ready gcs_answers
	curl -sf -o /dev/null -X POST "http://$HOST:$PORT/storage/v1/b?project=claimcheck-test" \
		-H 'Content-Type: application/json' -d "{\"name\": \"$BUCKET\"}" || die "creating bucket $BUCKET failed"
	echo "$NAME.sh: bucket $BUCKET"
}

cmd_env() {
	cat <<-EOF2
		export STORAGE_EMULATOR_HOST='$HOST:$PORT'
		export CLAIMCHECK_TEST_GCS_URL='gs://$BUCKET'
	EOF2
}

main "$@"
