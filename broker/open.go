package broker

import (
	"context"
	"errors"
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
// package documents its query parameters. The destination format
// parameters (format, pointer_bucket, pointer_marker: FormatOf) are
// checked and taken out before the transport sees the URL.
//
// Errors: claimcheck.ErrConfig for a URL that does not parse, a scheme no
// imported package registered, invalid format parameters, or parameters
// the transport refuses;
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
	if err := takeFormat(u); err != nil {
		return nil, err
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

// bindingParams are the query parameters of a broker URL that say where
// its messages go (RabbitMQ's queue, JetStream's stream and subject, SQS's
// queue URLs); the others (credentials, timeouts, sizes, consumer
// settings) do not change the destination.
var bindingParams = []string{"queue", "stream", "subject", "queue_url", "dead_letter_queue_url"}

// defaultPorts fill in a broker URL's port when it names none, so that
// amqp://host and amqp://host:5672 are one broker.
var defaultPorts = map[string]string{"amqp": "5672", "amqps": "5671", "nats": "4222", "tls": "4222"}

// MaxBindingLen is the longest Binding, in bytes.
const MaxBindingLen = 512

// Binding names the broker, and the queue or stream on it, that a broker
// URL publishes to, for recording with an outbox entry: the scheme, the
// host and port (a default port filled in), the path (a RabbitMQ virtual
// host) and the parameters that route messages (queue, stream, subject,
// queue_url, dead_letter_queue_url), sorted; never a user name, password
// or other parameter, so it is safe to store and print. Two URLs that
// reach the same queue the same way have the same binding; a routing
// parameter left to its default and one given with the default's value
// differ, so give them alike. Errors: a URL that does not parse, or a
// binding longer than MaxBindingLen (ErrConfig).
func Binding(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("broker: %q is not a broker URL: %w", RedactURL(rawURL), claimcheck.ErrConfig)
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.ToLower(u.Host)
	if host != "" && u.Port() == "" && defaultPorts[scheme] != "" {
		host += ":" + defaultPorts[scheme]
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	q := u.Query()
	keep := url.Values{}
	for _, name := range bindingParams {
		for _, v := range q[name] {
			if pu, err := url.Parse(v); err == nil && pu.User != nil { // a queue URL with credentials
				pu.User = nil
				v = pu.String()
			}
			keep.Add(name, v)
		}
	}
	b := scheme + "://" + host + path
	if len(keep) > 0 {
		b += "?" + keep.Encode()
	}
	if len(b) > MaxBindingLen {
		return "", fmt.Errorf("broker: the URL's broker and queue make %d bytes, at most %d allowed: %w", len(b), MaxBindingLen, claimcheck.ErrConfig)
	}
	return b, nil
}

// DeleteTopology opens rawURL and deletes the queues or streams it names,
// with their messages, where its transport can (scratch queues of
// benchmarks and tests; never one in use). Errors: Open's, the
// transport's, or one saying the transport cannot delete its queues.
func DeleteTopology(ctx context.Context, rawURL string) error {
	tr, err := Open(ctx, rawURL)
	if err != nil {
		return err
	}
	defer tr.Close()
	switch d := tr.(type) {
	case interface{ DeleteTopology() error }:
		return d.DeleteTopology()
	case interface{ DeleteTopology(context.Context) error }:
		return d.DeleteTopology(ctx)
	}
	return errors.New("broker: the transport cannot delete its queues")
}

// System is the OpenTelemetry messaging.system of tr's broker
// (https://opentelemetry.io/docs/specs/semconv/messaging/): rabbitmq,
// nats, aws_sqs, as the transport names it (a MessagingSystem method), else
// "claimcheck" for a transport that names none (a test's).
func System(tr Transport) string {
	if s, ok := tr.(interface{ MessagingSystem() string }); ok {
		return s.MessagingSystem()
	}
	return "claimcheck"
}
