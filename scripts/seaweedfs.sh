#!/usr/bin/env bash
# A real S3-compatible server for claimcheck's tests: SeaweedFS `weed mini`
# (master, volume, filer and S3 gateway in one process), on 127.0.0.1 only.
#
#   scripts/seaweedfs.sh build   build weed into $CLAIMCHECK_CACHE/bin (default
#                                ~/.cache/claimcheck/bin) unless the pinned
#                                version is already there (~9 min, ~2.6 GB RAM)
#   scripts/seaweedfs.sh start   start it, create the test bucket, wait until S3
#                                answers; state (pid, log, data) in $CLAIMCHECK_S3_RUN_DIR
#   scripts/seaweedfs.sh stop    stop the server this script started, remove its data
#   scripts/seaweedfs.sh env     print the export lines the tests need:
#                                eval "$(scripts/seaweedfs.sh env)"
#   scripts/seaweedfs.sh status  say whether it runs
#
# Settings (environment, all optional):
#   CLAIMCHECK_CACHE          build cache (default ~/.cache/claimcheck)
#   CLAIMCHECK_S3_RUN_DIR     pid file, log, config, data (default ${TMPDIR:-/tmp}/claimcheck-seaweedfs)
#   CLAIMCHECK_S3_PORT        S3 port (default 8333); the other components use
#                             weed's defaults: master 9333, volume 9340, filer 8888,
#                             their gRPC ports +10000, admin 12535 and 22535
#   CLAIMCHECK_S3_BUCKET      test bucket (default claimcheck-test)
#   CLAIMCHECK_S3_ACCESS_KEY  S3 access key (default claimcheck-test)
#   CLAIMCHECK_S3_SECRET_KEY  S3 secret key (default claimcheck-test-secret)
#   CLAIMCHECK_S3_REGION      region the tests sign for (default us-east-1)
#   CLAIMCHECK_S3_START_TIMEOUT  seconds start waits for S3 (default 120)
set -euo pipefail

# The pinned SeaweedFS: a pseudo-version of github.com/seaweedfs/seaweedfs.
# Its go.mod has replace directives, so `go install mod@version` refuses it:
# download the module and build ./weed inside it.
SEAWEEDFS_MODULE=github.com/seaweedfs/seaweedfs
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6

CACHE=${CLAIMCHECK_CACHE:-$HOME/.cache/claimcheck}
WEED=$CACHE/bin/weed
STAMP=$CACHE/bin/weed.version
RUN_DIR=${CLAIMCHECK_S3_RUN_DIR:-${TMPDIR:-/tmp}/claimcheck-seaweedfs}
PID_FILE=$RUN_DIR/weed.pid
LOG=$RUN_DIR/weed.log
S3_PORT=${CLAIMCHECK_S3_PORT:-8333}
BUCKET=${CLAIMCHECK_S3_BUCKET:-claimcheck-test}
ACCESS_KEY=${CLAIMCHECK_S3_ACCESS_KEY:-claimcheck-test}
SECRET_KEY=${CLAIMCHECK_S3_SECRET_KEY:-claimcheck-test-secret}
REGION=${CLAIMCHECK_S3_REGION:-us-east-1}
START_TIMEOUT=${CLAIMCHECK_S3_START_TIMEOUT:-120}
HOST=127.0.0.1

die() { echo "seaweedfs.sh: $*" >&2; exit 1; }

built() { [[ -x $WEED && -f $STAMP && "$(cat "$STAMP")" == "$SEAWEEDFS_VERSION" ]]; }

cmd_build() {
	if built; then
		echo "seaweedfs.sh: $WEED is $SEAWEEDFS_VERSION already"
		return
	fi
	command -v go >/dev/null || die "go is not on PATH"
	mkdir -p "$CACHE/bin"
	local tmp dir
	tmp=$(mktemp -d)
	# Outside any module, so the project's go.mod is not touched.
	dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	rmdir "$tmp"
	[[ -n $dir && -d $dir ]] || die "go mod download $SEAWEEDFS_MODULE@$SEAWEEDFS_VERSION gave no directory"
	echo "seaweedfs.sh: building weed $SEAWEEDFS_VERSION from $dir (several minutes)"
	local start=$SECONDS commit=${SEAWEEDFS_VERSION##*-}
	# Build beside the target and rename: a running weed keeps its old inode.
	(cd "$dir" && GOFLAGS=-buildvcs=false go build \
		-ldflags "-X $SEAWEEDFS_MODULE/weed/util/version.COMMIT=$commit" \
		-o "$WEED.tmp.$$" ./weed) || { rm -f "$WEED.tmp.$$"; die "building weed failed"; }
	mv -f "$WEED.tmp.$$" "$WEED"
	echo "$SEAWEEDFS_VERSION" >"$STAMP"
	echo "seaweedfs.sh: built $WEED in $((SECONDS - start)) s"
}

running_pid() {
	[[ -f $PID_FILE ]] || return 1
	local pid
	pid=$(cat "$PID_FILE")
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
	# Only a weed process: never signal a recycled pid.
	[[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == weed ]] || return 1
	echo "$pid"
}

s3_answers() {
	# Any HTTP status means the S3 gateway is listening and serving.
	curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://$HOST:$S3_PORT/" 2>/dev/null | grep -qv '^000$'
}

port_in_use() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

cmd_start() {
	built || die "no weed $SEAWEEDFS_VERSION in $CACHE/bin: run '$0 build' first"
	command -v curl >/dev/null || die "curl is not on PATH"
	if pid=$(running_pid); then
		echo "seaweedfs.sh: already running (pid $pid), S3 on http://$HOST:$S3_PORT"
		return
	fi
	local p
	for p in "$S3_PORT" 9333 9340 8888 12535; do
		port_in_use "$p" && die "port $HOST:$p is in use by another process (ss -ltnp | grep :$p)"
	done
	# Only what this script made: never rm -rf a directory it was given.
	rm -rf "$RUN_DIR/data" "$RUN_DIR/s3.json" "$LOG" "$PID_FILE"
	mkdir -p "$RUN_DIR/data"
	chmod 700 "$RUN_DIR"
	# Static credentials: with an identity configured, SeaweedFS refuses
	# anonymous and unknown-key requests (without one it allows anything).
	cat >"$RUN_DIR/s3.json" <<-EOF
		{"identities": [{"name": "claimcheck-test",
		  "credentials": [{"accessKey": "$ACCESS_KEY", "secretKey": "$SECRET_KEY"}],
		  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}],
		 "kms": {"default_provider": "local",
		  "providers": {"local": {"type": "local", "enableOnDemandCreate": true}}}}
	EOF
	chmod 600 "$RUN_DIR/s3.json"
	# setsid: its own process group, so a CI job's signals do not reach it
	# half-way; stop signals it by pid. -s3.autoCreateBucket=false: as on
	# S3, a write to a bucket that does not exist fails instead of creating it.
	(cd "$RUN_DIR" && exec setsid "$WEED" mini \
		-dir="$RUN_DIR/data" \
		-ip="$HOST" -ip.bind="$HOST" \
		-master.telemetry=false \
		-s3.port="$S3_PORT" -s3.config="$RUN_DIR/s3.json" \
		-bucket="$BUCKET" -s3.autoCreateBucket=false \
		-webdav=false -admin.ui=false -admin.port.legacy=0 \
		-s3.port.iceberg=0 -s3.port.lance=0 \
		</dev/null >"$LOG" 2>&1) &
	echo $! >"$PID_FILE"
	local waited=0
	until s3_answers && grep -q 'All enabled components are running' "$LOG"; do
		if ! running_pid >/dev/null; then
			echo "seaweedfs.sh: weed exited during start; last lines of $LOG:" >&2
			tail -n 40 "$LOG" >&2
			exit 1
		fi
		if ((waited >= START_TIMEOUT)); then
			echo "seaweedfs.sh: S3 on $HOST:$S3_PORT did not answer within $START_TIMEOUT s; last lines of $LOG:" >&2
			tail -n 40 "$LOG" >&2
			cmd_stop >&2
			exit 1
		fi
		sleep 1
		waited=$((waited + 1))
	done
	echo "seaweedfs.sh: started (pid $(cat "$PID_FILE")) in ~${waited} s, S3 on http://$HOST:$S3_PORT, bucket $BUCKET"
}

cmd_stop() {
	local pid
	if ! pid=$(running_pid); then
		rm -f "$PID_FILE"
		echo "seaweedfs.sh: not running"
		return
	fi
	kill -TERM "$pid"
	local i
	for i in $(seq 1 30); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "seaweedfs.sh: pid $pid did not stop in 15 s; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$RUN_DIR/data" "$RUN_DIR/s3.json" "$PID_FILE"
	echo "seaweedfs.sh: stopped (pid $pid); log kept in $LOG"
}

cmd_env() {
	cat <<-EOF
		export CLAIMCHECK_TEST_S3_URL='s3://$BUCKET?endpoint=http://$HOST:$S3_PORT&region=$REGION&use_path_style=true'
		export AWS_ACCESS_KEY_ID='$ACCESS_KEY'
		export AWS_SECRET_ACCESS_KEY='$SECRET_KEY'
		export AWS_REGION='$REGION'
		export AWS_EC2_METADATA_DISABLED=true
		export CLAIMCHECK_TEST_S3_SSE_KMS_KEY='claimcheck-test-key'
	EOF
}

cmd_status() {
	local pid
	if pid=$(running_pid); then
		echo "seaweedfs.sh: running (pid $pid), S3 on http://$HOST:$S3_PORT"
	else
		echo "seaweedfs.sh: not running"
		return 1
	fi
}

case ${1:-} in
build) cmd_build ;;
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
status) cmd_status ;;
*) die "usage: $0 build|start|stop|env|status" ;;
esac
