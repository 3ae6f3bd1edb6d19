#!/usr/bin/env bash
# An AWS KMS emulator for the awskms:// keeper tests: local-kms
# (github.com/nsmithuk/local-kms), reachable on 127.0.0.1 only.
#
#   scripts/local-kms.sh build   go install it into $CLAIMCHECK_CACHE/bin
#                                (default ~/.cache/claimcheck/bin) unless the
#                                pinned version is there (~1 min)
#   scripts/local-kms.sh start   start it; state (log, data) in $CLAIMCHECK_KMS_RUN_DIR
#   scripts/local-kms.sh stop    stop what this script started, remove its data
#   scripts/local-kms.sh env     print the export lines the tests need:
#                                eval "$(scripts/local-kms.sh env)"
#   scripts/local-kms.sh status  say whether it runs
#
# local-kms has no setting for the address it listens on (only PORT: it
# binds every interface), so it runs in a network namespace of its own
# behind loopback-only.sh (root, unshare and socat). It keeps its keys in
# KMS_DATA_PATH (here RUN_DIR/data, removed by stop) and answers for any
# credentials; its account is 111122223333 and its region the one below.
#
# Settings (environment, all optional):
#   CLAIMCHECK_CACHE        cache (default ~/.cache/claimcheck)
#   CLAIMCHECK_KMS_RUN_DIR  log, data, socket (default ${TMPDIR:-/tmp}/claimcheck-local-kms)
#   CLAIMCHECK_KMS_PORT     port on 127.0.0.1 (default 18080)
#   CLAIMCHECK_KMS_REGION   region (default us-east-1)
set -euo pipefail
NAME=local-kms
RUN_DIR=${CLAIMCHECK_KMS_RUN_DIR:-${TMPDIR:-/tmp}/claimcheck-local-kms}
PORT=${CLAIMCHECK_KMS_PORT:-18080}
REGION=${CLAIMCHECK_KMS_REGION:-us-east-1}
# shellcheck source=emulator-lib.sh
. "$(dirname "$0")/emulator-lib.sh"

LOCAL_KMS_MODULE=github.com/nsmithuk/local-kms@v0.0.0-20260228092603-2a5e92d09ab6
BIN=$CACHE/bin/local-kms

cmd_build() { go_install "$BIN" "$LOCAL_KMS_MODULE"; echo "$NAME.sh: $BIN is $LOCAL_KMS_MODULE"; }

kms_answers() {
	# ListKeys answers 200 with any credentials.
	curl -s -o /dev/null --max-time 2 -w '%{http_code}' -X POST "http://$HOST:$PORT/" \
		-H 'Content-Type: application/x-amz-json-1.1' -H 'X-Amz-Target: TrentService.ListKeys' -d '{}' 2>/dev/null | grep -q '^200$'
}

cmd_start() {
	[[ -x $BIN ]] || die "no $BIN: run '$0 build' first"
	already_running && return
	check_port_free
	rm -rf "$RUN_DIR/data"
	mkdir -p "$RUN_DIR/data"
	# No seed file: the tests create their keys through the API.
	KMS_DATA_PATH=$RUN_DIR/data KMS_REGION=$REGION KMS_SEED_PATH=$RUN_DIR/no-seed.yaml PORT=$PORT \
		launch_isolated "$BIN"
	wait_ready kms_answers
}

cmd_env() {
	cat <<-EOF2
		export CLAIMCHECK_TEST_KMS_ENDPOINT='http://$HOST:$PORT'
		export CLAIMCHECK_TEST_KMS_REGION='$REGION'
	EOF2
}

main "$@"
