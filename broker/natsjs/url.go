package natsjs

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// Defaults of OpenURL for the parameters that Options requires.
// DefaultURLSubject is the default subject of the stream DefaultURLStream
// only: see DefaultSubject.
const (
	DefaultURLStream   = "CLAIMCHECK"
	DefaultURLSubject  = "claimcheck.jobs"
	DefaultURLConsumer = "claimcheck"
)

// DefaultSubject is the subject Open and OpenURL use for stream when none
// is given: "claimcheck." + stream + ".jobs", the stream name's case kept
// (NATS names and subjects are case-sensitive, so streams "JOBS" and
// "jobs" get different subjects) and any character other than letters,
// digits, '-' and '_' (none in a valid stream name) replaced by '_'; but
// DefaultURLSubject ("claimcheck.jobs") for DefaultURLStream
// ("CLAIMCHECK"), the subject that stream had before subjects were derived
// from stream names. Different stream names give different subjects, none
// of them another's dead-letter subject.
func DefaultSubject(stream string) string {
	if stream == DefaultURLStream {
		return DefaultURLSubject
	}
	tok := []byte(stream)
	for i, c := range tok {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			tok[i] = '_'
		}
	}
	if len(tok) == 0 {
		tok = []byte("_")
	}
	return "claimcheck." + string(tok) + ".jobs"
}

func init() {
	broker.Register("nats", func(ctx context.Context, u *url.URL) (broker.Transport, error) {
		t, err := OpenURL(ctx, u)
		if err != nil {
			return nil, err // not a nil *Transport in a non-nil interface
		}
		return t, nil
	})
}

// OpenURL opens the transport a "nats" URL names, such as
// "nats://user:password@127.0.0.1:4222/?stream=JOBS&ack_wait=10m". It is the
// opener broker.Open uses for the scheme. Query parameters, each at most
// once:
//
//   - stream: Options.Stream, default DefaultURLStream ("CLAIMCHECK");
//   - subject: Options.Subject, default DefaultSubject(stream):
//     "claimcheck.STREAM.jobs" for a stream named STREAM, except
//     "claimcheck.jobs" for the default stream "CLAIMCHECK", so two stream
//     names on one server do not need a subject each to avoid "subjects
//     overlap with an existing stream". A stream that already exists must
//     have exactly this subject (and the dead-letter one its subject plus
//     ".dead"): Open refuses to change it (see the package doc);
//   - consumer: Options.Consumer, default DefaultURLConsumer ("claimcheck");
//   - max_message_size: Options.MaxMessageSize, a positive number of bytes;
//   - max_deliver: Options.MaxDeliver, a positive integer, or -1 for
//     unlimited (the default);
//   - ack_wait: Options.AckWait, a positive Go duration ("90s", "5m");
//   - duplicate_window: Options.DuplicateWindow, a positive Go duration.
//
// The URL without its query (scheme, user information, host and port) is
// passed to Open with those options.
//
// Errors: claimcheck.ErrConfig naming the parameter for an unknown or
// repeated parameter or an invalid value, and for a URL without a host;
// otherwise Open's errors. Error strings never contain the URL's password
// or token.
func OpenURL(ctx context.Context, u *url.URL) (*Transport, error) {
	opts, err := urlOptions(u)
	if err != nil {
		return nil, err
	}
	rest := *u
	rest.RawQuery, rest.ForceQuery, rest.Fragment, rest.RawFragment = "", false, "", ""
	return Open(ctx, rest.String(), opts)
}

// urlOptions reads the query parameters of OpenURL. Its errors name the
// parameter and quote only values that cannot be secrets.
func urlOptions(u *url.URL) (Options, error) {
	opts := Options{Stream: DefaultURLStream, Consumer: DefaultURLConsumer}
	if u.Host == "" {
		return opts, fmt.Errorf("natsjs: URL has no host (want nats://host:port/?params): %w", claimcheck.ErrConfig)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return opts, fmt.Errorf("natsjs: URL query does not parse: %w", claimcheck.ErrConfig)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad := func(k, v, want string) error {
		return fmt.Errorf("natsjs: URL parameter %s=%q: want %s: %w", k, v, want, claimcheck.ErrConfig)
	}
	for _, k := range keys {
		vs := q[k]
		switch k {
		case "stream", "subject", "consumer", "max_message_size", "max_deliver", "ack_wait", "duplicate_window":
		default:
			// The value is not quoted: it may be a secret put in the
			// wrong place.
			return opts, fmt.Errorf("natsjs: unknown URL parameter %q (known: stream, subject, consumer, max_message_size, max_deliver, ack_wait, duplicate_window): %w",
				k, claimcheck.ErrConfig)
		}
		if len(vs) != 1 {
			return opts, fmt.Errorf("natsjs: URL parameter %s given %d times: %w", k, len(vs), claimcheck.ErrConfig)
		}
		v := vs[0]
		switch k {
		case "stream", "consumer":
			if !validName(v) {
				return opts, bad(k, v, "a name of letters, digits, '-' and '_'")
			}
			if k == "stream" {
				opts.Stream = v
			} else {
				opts.Consumer = v
			}
		case "subject":
			if !validSubject(v) {
				return opts, bad(k, v, "a literal subject (dot-separated tokens, no wildcards)")
			}
			opts.Subject = v
		case "max_message_size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return opts, bad(k, v, "a positive number of bytes")
			}
			opts.MaxMessageSize = n
		case "max_deliver":
			n, err := strconv.Atoi(v)
			if err != nil || n == 0 || n < -1 {
				return opts, bad(k, v, "a positive integer, or -1 for unlimited")
			}
			opts.MaxDeliver = n
		case "ack_wait", "duplicate_window":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return opts, bad(k, v, `a positive duration such as "90s" or "5m"`)
			}
			if k == "ack_wait" {
				opts.AckWait = d
			} else {
				opts.DuplicateWindow = d
			}
		}
	}
	if opts.Subject == "" {
		opts.Subject = DefaultSubject(opts.Stream)
	}
	return opts, nil
}
