package rabbitmq

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

func init() {
	broker.Register("amqp", openURL)
	broker.Register("amqps", openURL)
}

// amqpParams are the query parameters amqp091-go reads itself
// (amqp091.ParseURI); openURL passes them on.
var amqpParams = map[string]bool{
	"heartbeat": true, "connection_timeout": true, "channel_max": true, "auth_mechanism": true,
	"certfile": true, "keyfile": true, "cacertfile": true, "server_name_indication": true,
}

// openURL is the broker.Opener for amqp:// and amqps:// URLs; the package
// doc lists its query parameters.
func openURL(ctx context.Context, u *url.URL) (broker.Transport, error) {
	redacted := u.Redacted()
	bad := func(format string, args ...any) error {
		return fmt.Errorf("rabbitmq: URL %s: %s: %w", redacted, fmt.Sprintf(format, args...), claimcheck.ErrConfig)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, bad("query does not parse")
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	var opts Options
	rest := url.Values{}
	for _, name := range names {
		vals := q[name]
		if amqpParams[name] {
			rest[name] = vals
			continue
		}
		switch name {
		case "queue", "max_message_size", "prefetch", "max_priority":
		default:
			return nil, bad("unknown query parameter %q (known: queue, max_message_size, prefetch, max_priority, and amqp091-go's %s)", name, strings.Join(sortedKeys(amqpParams), ", "))
		}
		if len(vals) != 1 {
			return nil, bad("parameter %q given %d times", name, len(vals))
		}
		v := vals[0]
		switch name {
		case "queue":
			if v == "" {
				return nil, bad("parameter queue is empty")
			}
			opts.Queue = v
		case "max_message_size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return nil, bad("parameter max_message_size=%q is not a positive number of bytes", v)
			}
			opts.MaxMessageSize = n
		case "prefetch":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 65535 {
				return nil, bad("parameter prefetch=%q is not a number from 1 to 65535", v)
			}
			opts.Prefetch = n
		case "max_priority":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 255 {
				return nil, bad("parameter max_priority=%q is not a number from 1 to 255 (4 covers claimcheck's priorities)", v)
			}
			opts.MaxPriority = n
		}
	}
	if opts.Queue == "" {
		return nil, bad("missing required parameter queue")
	}
	v := *u
	v.Scheme = strings.ToLower(u.Scheme) // amqp091-go wants it lowercase
	v.RawQuery = rest.Encode()
	v.ForceQuery = false
	return Open(ctx, v.String(), opts)
}

func sortedKeys(m map[string]bool) []string {
	s := make([]string, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
