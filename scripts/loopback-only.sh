#!/usr/bin/env bash
# loopback-only.sh PORT SOCKET CMD...: run CMD, a server that listens on
# every interface at PORT and cannot be told otherwise, so that only this
# machine's loopback reaches it: CMD runs in a network namespace of its own
# (unshare -n, root) whose only interface is its own loopback; socat carries
# 127.0.0.1:PORT on the host to it through the Unix socket SOCKET.
# Run it in a process group of its own (setsid): stopping that group stops
# CMD and both socats; when any of them ends, the rest are stopped too.
set -euo pipefail
port=$1 sock=$2
shift 2
if [[ ${CLAIMCHECK_LOOPBACK_ONLY_INSIDE:-} != 1 ]]; then
	rm -f "$sock"
	CLAIMCHECK_LOOPBACK_ONLY_INSIDE=1 unshare --net "$0" "$port" "$sock" "$@" &
	socat "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" "UNIX-CONNECT:$sock" &
	wait -n || true
	trap '' TERM
	kill -TERM 0
	exit 1
fi
ip link set lo up
"$@" &
socat "UNIX-LISTEN:$sock,fork,unlink-early,mode=600" "TCP:127.0.0.1:$port" &
wait -n || true
exit 1
