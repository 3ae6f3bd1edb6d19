#!/usr/bin/env bash
# The npm package sns-sqs-big-payload (an SQS/S3 large-payload client other
# teams run), installed from the npm registry for the interoperability test
# broker/sqs TestNpmSnsSqsBigPayload (which also needs fauxqs and SeaweedFS).
#
#   scripts/sns-sqs-big-payload.sh build   npm install the pinned versions into
#                                          $CLAIMCHECK_CACHE/npm/sns-sqs-big-payload
#                                          (default ~/.cache/claimcheck) unless there
#   scripts/sns-sqs-big-payload.sh env     print the export line the test reads:
#                                          eval "$(scripts/sns-sqs-big-payload.sh env)"
#
# aws-sdk@2 is the package's runtime dependency, which its package.json
# lists only among its development dependencies. The test runs the
# machine's node (Node.js 20 or later).
set -euo pipefail
CACHE=${CLAIMCHECK_CACHE:-$HOME/.cache/claimcheck}
DIR=$CACHE/npm/sns-sqs-big-payload
PACKAGES="sns-sqs-big-payload@0.1.4 aws-sdk@2.1693.0"

case ${1:-} in
build)
	if [[ -f $DIR/.installed && "$(cat "$DIR/.installed")" == "$PACKAGES" ]]; then
		echo "sns-sqs-big-payload.sh: $DIR has $PACKAGES"
		exit 0
	fi
	command -v npm >/dev/null || { echo "sns-sqs-big-payload.sh: npm is not on PATH" >&2; exit 1; }
	rm -rf "$DIR"
	mkdir -p "$DIR"
	# shellcheck disable=SC2086 # two package specs
	npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error $PACKAGES >&2
	echo "$PACKAGES" >"$DIR/.installed"
	echo "sns-sqs-big-payload.sh: installed $PACKAGES in $DIR"
	;;
env)
	echo "export CLAIMCHECK_TEST_NPM_DIR='$DIR'"
	;;
*)
	echo "usage: $0 build|env" >&2
	exit 2
	;;
esac
