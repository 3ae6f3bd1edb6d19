#!/usr/bin/env bash
# An SQS emulator speaking SQS's current JSON protocol for the SQS transport
# tests: fauxqs (npm), on Node.js 22 from the npm registry's `node` package,
# reachable on 127.0.0.1 only.
#
#   scripts/fauxqs.sh build   npm install Node.js and fauxqs into
#                             $CLAIMCHECK_CACHE (default ~/.cache/claimcheck)
#                             unless the pinned versions are there (~2 min)
#   scripts/fauxqs.sh start   start it; state (log, socket) in $CLAIMCHECK_SQS_RUN_DIR
#   scripts/fauxqs.sh stop    stop what this script started
#   scripts/fauxqs.sh env     print the export lines the tests need:
#                             eval "$(scripts/fauxqs.sh env)"
#   scripts/fauxqs.sh status  say whether it runs
#
# fauxqs always listens on 0.0.0.0 (FAUXQS_PORT sets only the port), so it
# runs in a network namespace of its own behind loopback-only.sh (root,
# unshare and socat). It keeps everything in memory (no FAUXQS_DATA_DIR),
# accepts any credentials, and, with FAUXQS_HOST unset, names its queues
# http://127.0.0.1:PORT/000000000000/NAME. The tests create their own queues.
#
# Settings (environment, all optional):
#   CLAIMCHECK_CACHE        cache (default ~/.cache/claimcheck)
#   CLAIMCHECK_SQS_RUN_DIR  log, socket (default ${TMPDIR:-/tmp}/claimcheck-fauxqs)
#   CLAIMCHECK_SQS_PORT     port on 127.0.0.1 (default 14566)
set -euo pipefail
NAME=fauxqs
RUN_DIR=${CLAIMCHECK_SQS_RUN_DIR:-${TMPDIR:-/tmp}/claimcheck-fauxqs}
PORT=${CLAIMCHECK_SQS_PORT:-14566}
# shellcheck source=emulator-lib.sh
. "$(dirname "$0")/emulator-lib.sh"

FAUXQS_PACKAGE=fauxqs@2.4.1
DIR=$CACHE/npm/fauxqs

cmd_build() { npm_install "$DIR" "$FAUXQS_PACKAGE"; echo "$NAME.sh: $DIR has $FAUXQS_PACKAGE on Node.js $("$NODE" --version)"; }

sqs_answers() {
	curl -s -o /dev/null --max-time 2 -w '%{http_code}' -X POST "http://$HOST:$PORT/" \
		-H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: AmazonSQS.ListQueues' -d '{}' 2>/dev/null | grep -q '^200$'
}

cmd_start() {
	[[ -f $DIR/.installed && -x $NODE ]] || die "no fauxqs in $DIR: run '$0 build' first"
	already_running && return
	check_port_free
	FAUXQS_PORT=$PORT FAUXQS_LOGGER=false FAUXQS_DEFAULT_REGION=us-east-1 \
		launch_isolated "$NODE" "$DIR/node_modules/fauxqs/dist/cli.js"
	wait_ready sqs_answers
}

cmd_env() {
	cat <<-EOF2
		export CLAIMCHECK_TEST_SQS_ENDPOINT='http://$HOST:$PORT'
	EOF2
}

main "$@"
