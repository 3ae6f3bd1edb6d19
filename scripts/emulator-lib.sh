# Shared by the emulator scripts (fake-gcs.sh, local-kms.sh, fauxqs.sh,
# azurite.sh): install once into the cache, start on 127.0.0.1 only in a
# process group of its own, stop by that group's id, say whether it runs.
# Source it after setting NAME (for messages), RUN_DIR and PORT.
#
# A program that cannot be told to listen on loopback only (local-kms and
# fauxqs bind 0.0.0.0) runs in a network namespace of its own (unshare -n)
# whose only interface is its loopback; socat carries 127.0.0.1:PORT on the
# host to it through a Unix socket in RUN_DIR, so nothing outside this
# machine's loopback can reach it.

CACHE=${CLAIMCHECK_CACHE:-$HOME/.cache/claimcheck}
HOST=127.0.0.1
PID_FILE=$RUN_DIR/pgid
LOG=$RUN_DIR/$NAME.log
START_TIMEOUT=${CLAIMCHECK_EMULATOR_START_TIMEOUT:-120}

die() { echo "$NAME.sh: $*" >&2; exit 1; }

# Node.js >= 22 from the npm registry's `node` package, for the npm
# emulators (the machine's own Node.js may be older).
NODE_VERSION=22.23.3
NODE_DIR=$CACHE/node-$NODE_VERSION
NODE=$NODE_DIR/node_modules/.bin/node

install_node() {
	[[ -x $NODE ]] && "$NODE" --version 2>/dev/null | grep -qx "v$NODE_VERSION" && return
	command -v npm >/dev/null || die "npm is not on PATH (Debian: apt-get install npm)"
	mkdir -p "$NODE_DIR"
	npm install --prefix "$NODE_DIR" --no-audit --no-fund --loglevel=error "node@$NODE_VERSION" >&2 ||
		die "npm install node@$NODE_VERSION failed"
	"$NODE" --version >/dev/null || die "$NODE does not run"
}

# npm_install DIR PACKAGE@VERSION: install into DIR (a prefix of its own)
# unless that version is there; a stamp file records it.
npm_install() {
	local dir=$1 pkg=$2
	[[ -f $dir/.installed && "$(cat "$dir/.installed")" == "$pkg" ]] && return
	install_node
	rm -rf "$dir"
	mkdir -p "$dir"
	local start=$SECONDS
	# npm runs install scripts with the Node.js on PATH: put ours first.
	PATH=$(dirname "$NODE"):$PATH npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$pkg" >&2 ||
		die "npm install $pkg failed"
	echo "$pkg" >"$dir/.installed"
	echo "$NAME.sh: installed $pkg in $((SECONDS - start)) s" >&2
}

# go_install TARGET MODULE@VERSION: go install into TARGET's directory,
# outside any module (the project's go.mod is not touched).
go_install() {
	local target=$1 mod=$2 stamp=$1.version
	[[ -x $target && -f $stamp && "$(cat "$stamp")" == "$mod" ]] && return
	command -v go >/dev/null || die "go is not on PATH"
	local tmp start=$SECONDS
	tmp=$(mktemp -d)
	(cd "$tmp" && GOFLAGS=-mod=mod GOBIN=$tmp go install "$mod") || { rm -rf "$tmp"; die "go install $mod failed"; }
	mkdir -p "$(dirname "$target")"
	# Rename into place: a running copy keeps its old inode.
	mv -f "$tmp"/* "$target"
	rm -rf "$tmp"
	echo "$mod" >"$stamp"
	echo "$NAME.sh: built $target in $((SECONDS - start)) s" >&2
}

# running_pgid prints the process group this script started, if it runs.
running_pgid() {
	[[ -f $PID_FILE ]] || return 1
	local pgid
	pgid=$(cat "$PID_FILE")
	[[ -n $pgid ]] && kill -0 -- "-$pgid" 2>/dev/null || return 1
	echo "$pgid"
}

port_in_use() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# launch CMD...: run CMD in a new session (its own process group, so a CI
# job's signals do not reach it half-way), output to LOG; records the group.
launch() {
	mkdir -p "$RUN_DIR"
	chmod 700 "$RUN_DIR"
	: >"$LOG"
	setsid "$@" </dev/null >>"$LOG" 2>&1 &
	echo $! >"$PID_FILE" # setsid's child is the group leader: pgid == pid
}

# launch_isolated CMD...: launch CMD in a network namespace of its own whose
# only interface is loopback, reachable at HOST:PORT (loopback-only.sh).
launch_isolated() {
	command -v socat >/dev/null || die "socat is not on PATH (Debian: apt-get install socat)"
	command -v unshare >/dev/null || die "unshare is not on PATH (Debian: util-linux)"
	launch "$(dirname "${BASH_SOURCE[0]}")/loopback-only.sh" "$PORT" "$RUN_DIR/$NAME.sock" "$@"
}

# wait_ready CHECK: wait until CHECK (a function) succeeds.
wait_ready() {
	local waited=0
	until "$1"; do
		if ! running_pgid >/dev/null; then
			echo "$NAME.sh: it exited during start; last lines of $LOG:" >&2
			tail -n 40 "$LOG" >&2
			exit 1
		fi
		if ((waited >= START_TIMEOUT * 2)); then
			echo "$NAME.sh: no answer on $HOST:$PORT within $START_TIMEOUT s; last lines of $LOG:" >&2
			tail -n 40 "$LOG" >&2
			cmd_stop >&2
			exit 1
		fi
		sleep 0.5
		waited=$((waited + 1))
	done
	echo "$NAME.sh: started (process group $(cat "$PID_FILE")) in ~$((waited / 2)) s on http://$HOST:$PORT"
}

# http_answers: any HTTP status from HOST:PORT.
http_answers() {
	curl -s -o /dev/null --max-time 2 -w '%{http_code}' "http://$HOST:$PORT/" 2>/dev/null | grep -qv '^000$'
}

# already_running: true (saying so) when the emulator this script started runs.
already_running() {
	local pgid
	pgid=$(running_pgid) || return 1
	echo "$NAME.sh: already running (process group $pgid) on http://$HOST:$PORT"
}

check_port_free() {
	port_in_use "$PORT" && die "port $HOST:$PORT is in use by another process (ss -ltnp | grep :$PORT)"
	return 0
}

cmd_stop() {
	local pgid
	if ! pgid=$(running_pgid); then
		rm -f "$PID_FILE"
		echo "$NAME.sh: not running"
		return
	fi
	kill -TERM -- "-$pgid" 2>/dev/null || true
	local i
	for i in $(seq 1 30); do
		kill -0 -- "-$pgid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 -- "-$pgid" 2>/dev/null; then
		echo "$NAME.sh: process group $pgid did not stop in 15 s; killing it" >&2
		kill -KILL -- "-$pgid" 2>/dev/null || true
	fi
	rm -rf "$PID_FILE" "$RUN_DIR/data" "$RUN_DIR/$NAME.sock"
	echo "$NAME.sh: stopped (process group $pgid); log kept in $LOG"
}

cmd_status() {
	local pgid
	if pgid=$(running_pgid); then
		echo "$NAME.sh: running (process group $pgid) on http://$HOST:$PORT"
	else
		echo "$NAME.sh: not running"
		return 1
	fi
}

# main: dispatch build|start|stop|env|status to cmd_* functions.
main() {
	case ${1:-} in
	build | start | stop | env | status) "cmd_$1" ;;
	*) die "usage: $0 build|start|stop|env|status" ;;
	esac
}
