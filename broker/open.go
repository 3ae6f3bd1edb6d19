package broker

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/claimcheck/claimcheck"
)

// Opener opens a Transport from a parsed URL. Transport packages register
// one per scheme with Register, in the manner of gocloud.dev's URL openers.
type Opener func(ctx context.Context, u *url.URL) (Transport, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a transport available to Open under scheme (lowercase,
// without "://"). A transport package calls it from init; import the
// package for its side effect to enable the scheme. Registering a scheme
// twice panics.
func Register(scheme string, o Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("broker: scheme registered twice: " + scheme)
	}
	openers[scheme] = o
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// Open opens the transport a URL names, such as
// "amqp://guest:guest@127.0.0.1:5672/?queue=jobs" (broker/rabbitmq) or
// "nats://127.0.0.1:4222?stream=JOBS" (broker/natsjs); each transport
// package documents its query parameters.
//
// Errors: claimcheck.ErrConfig for a URL that does not parse, a scheme no
// imported package registered, or parameters the transport refuses;
// otherwise the transport's error (the broker unreachable), wrapped. Error
// strings never contain the URL's password.
func Open(ctx context.Context, rawURL string) (Transport, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("broker: %q is not a broker URL (want scheme://host/?params, one of %s): %w",
			RedactURL(rawURL), strings.Join(Schemes(), ", "), claimcheck.ErrConfig)
	}
	openersMu.RLock()
	o, ok := openers[strings.ToLower(u.Scheme)]
	openersMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("broker: unknown broker scheme %q (known: %s): %w", u.Scheme, strings.Join(Schemes(), ", "), claimcheck.ErrConfig)
	}
	return o(ctx, u)
}

// RedactURL hides the password of a broker URL, for messages and logs; a
// string that does not parse as a URL keeps only what follows its last
// '@'.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…" + s[i:]
	}
	return s
}
