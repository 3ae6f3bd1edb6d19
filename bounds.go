package claimcheck

import (
	"fmt"
	"net/url"
	"time"
)

// Bounds on every network call claimcheck makes to a store, a keeper, a
// database or a broker, so that a partitioned or silent server fails the
// call (ErrUnavailable, cause ErrTimeout, naming the endpoint) instead of
// blocking it forever:
//
//   - DefaultConnectTimeout, 10 s: one connection attempt (DNS lookup, TCP
//     and TLS handshakes). A server that is up accepts in milliseconds; 10 s
//     allows for a slow resolver and a distant region.
//   - DefaultStallTimeout, 20 s: how long an established connection may
//     make no progress at all, in either direction, before its pending read
//     or write fails: a request with no response, an upload the server stops
//     reading, a download the server stops sending. This bounds silence,
//     not duration: a 10 GiB transfer that keeps moving is never cut. S3's
//     slowest answers (CompleteMultipartUpload of many parts) keep the
//     connection alive with whitespace, so 20 s of silence means the server
//     or the network is gone.
//
// An s3:// store takes them from its URL (connect_timeout=10s,
// stall_timeout=20s, Go durations; see OpenStore). The AWS SDK retries a
// failed S3 request twice more (3 attempts, with a backoff of at most a few
// seconds), so a stalled S3 server fails a call within about 3 × 20 s plus
// the backoff: about 70 s with the defaults.
//
// A keeper's calls (gocloud.dev/secrets: a KMS, a vault) are bounded as a
// whole, since each carries a few hundred bytes: DefaultKeeperTimeout, 30 s
// (Options.KeeperTimeout), which leaves a KMS client room for its own
// connect timeout and a retry.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultStallTimeout   = 20 * time.Second
	DefaultKeeperTimeout  = 30 * time.Second
)

// netBounds are the connect and stall timeouts of one client.
type netBounds struct {
	connect, stall time.Duration
}

// netBoundsFromURL takes claimcheck's connect_timeout and stall_timeout
// parameters out of u (a driver would refuse them), defaulting to
// DefaultConnectTimeout and DefaultStallTimeout.
func netBoundsFromURL(u *url.URL) (netBounds, error) {
	b := netBounds{connect: DefaultConnectTimeout, stall: DefaultStallTimeout}
	q := u.Query()
	for _, p := range []struct {
		name string
		dst  *time.Duration
	}{{"connect_timeout", &b.connect}, {"stall_timeout", &b.stall}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > time.Hour {
			return b, fmt.Errorf("%s=%q: use a duration from 100ms to 1h, such as 10s", p.name, v)
		}
		*p.dst = d
		q.Del(p.name)
	}
	u.RawQuery = q.Encode()
	return b, nil
}
