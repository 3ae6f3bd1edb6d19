// Package rabbitmq is a broker.Transport over RabbitMQ (amqp091-go).
//
// Topology, declared by Open for a queue named Q (one queue per kind is the
// intended layout; a shared queue works too, see broker.Consume):
//
//   - Q: a durable quorum queue (x-queue-type=quorum) whose dead-letter
//     exchange is Q.dlx, so messages the broker itself gives up on (a
//     reject without requeue, a quorum delivery limit) are kept too. With
//     Options.MaxPriority (URL max_priority=4), Q is instead a durable
//     classic priority queue (x-queue-type=classic, x-max-priority), with
//     the same dead-letter exchange: quorum queues have no priorities
//     before RabbitMQ 4.0 and refuse x-max-priority.
//   - Q.dlx: a durable direct exchange, bound to Q.dead with routing key Q.
//   - Q.dead: the dead-letter queue (durable quorum).
//   - Q.retry: the delay queue (durable, classic): no consumers; each retried
//     message carries a per-message TTL (the AMQP expiration property) and
//     the queue dead-letters expired messages back to Q through the default
//     exchange. Nothing hot-loops: a retried message is out of Q until its
//     delay has passed.
//   - With Options.Exchange X: X, a durable fanout exchange that Publish
//     sends to, bound to Q and to every queue of Options.FanOut (each
//     declared with the topology above). The broker copies each message
//     to every bound queue; retries and dead letters stay in the copy's
//     own queue. FanOut names the copies for the relay's reference counts
//     (broker.FanOut); without it the fan-out is unknown and consumers
//     refuse deletion on acknowledgement.
//
// Choices:
//   - Publish uses publisher confirms on a dedicated channel and waits for
//     the confirm of every message; a nack, or a channel or connection
//     closed before the confirm, is an error naming the message
//     (broker.PublishError). The channel is held only while sending, so
//     concurrent Publish calls wait for their confirms in parallel.
//   - A message's broker.AttrID attribute, when set, is also its AMQP
//     message-id (otherwise a random one); Delivery.ID is the AttrID
//     attribute if the message has one, else the message-id, else the
//     delivery tag. Both survive Retry and DeadLetter.
//   - DeadLetter publishes a copy to Q.dead (through Q.dlx) with the reason
//     as header claimcheck-reason, waits for its confirm, then acks the
//     original. A plain reject without requeue would also reach Q.dead via
//     Q.dlx, but RabbitMQ cannot attach a reason to it (x-death only says
//     "rejected"); the copy keeps the reason, at the price of a possible
//     duplicate dead letter if the process dies between confirm and ack.
//   - Retry publishes a copy to Q.retry with expiration = delay and header
//     claimcheck-attempt = Attempt+1, waits for its confirm, then acks the
//     original (at-least-once, same duplicate caveat). The delay queue
//     expires messages only at its head (RabbitMQ's per-message TTL rule),
//     so a short delay queued behind a longer one waits for it: delays are
//     lower bounds, at most the longest pending delay (broker.Consume caps
//     it with MaxRetryDelay).
//   - Attempt = claimcheck-attempt header (1 if absent) + the quorum queue's
//     x-delivery-count (redeliveries after a consumer died or a channel
//     closed without settling). A classic priority queue counts no
//     deliveries: a redelivery after a consumer died adds 1 (the AMQP
//     redelivered flag), however many times it happened.
//   - Priority: a message's broker.AttrPriority p (1 highest … 4; absent
//     means 1) is published as AMQP priority 5-p, so a priority queue
//     delivers waiting messages of priority 1 first; Retry and DeadLetter
//     keep it. Only messages waiting in Q are ordered: up to Prefetch
//     messages already delivered to a consumer are worked first.
//     RabbitMQ cannot change the arguments of an existing queue: opening
//     a queue declared without x-max-priority with max_priority (or the
//     other way round, or with another number) fails with ErrConfig,
//     naming the queue, and changes nothing; drain and delete the queue,
//     or use a new queue name, to change it.
//   - MaxMessageSize is configured (default 256 KiB, broker.Size rules):
//     RabbitMQ accepts far larger messages but suffers from them.
//   - Extend is a no-op: RabbitMQ has no per-message lease; the
//     server-side consumer_timeout (30 min by default) closes a channel
//     holding an unacked delivery for longer, and must be set above the
//     longest job.
//
// Reconnection: a Transport survives broker outages. When its connection
// (or one of its channels) has closed, the next Publish, Receive,
// ReceiveDead, Retry, DeadLetter or DeleteTopology dials the same URL again
// (TCP connect and handshakes bounded by Options.DialTimeout), declares the
// topology again and reopens the channel it needs; concurrent callers share
// one dial, each waiting for it no longer than its context allows. While the broker
// cannot be reached these calls fail promptly with an error wrapping
// claimcheck.ErrUnavailable; after a failed dial, calls in the next
// RedialInterval fail at once with the same error instead of dialling
// again. Callers back off and call again; nothing needs reopening.
// Deliveries received on a channel that has since closed cannot be settled:
// the broker has already requeued them and will deliver them again (with
// Attempt incremented). Ack, Retry and DeadLetter of such a delivery return
// an error wrapping claimcheck.ErrUnavailable and do nothing else.
//
// URLs: importing this package registers the schemes "amqp" and "amqps"
// with broker.Open, for URLs such as
//
//	amqp://user:pass@host:5672/vhost?queue=jobs&max_message_size=262144&prefetch=32
//
// Query parameters: queue (Options.Queue, required: there is no default
// queue, so that two programs never share one by accident),
// max_message_size (Options.MaxMessageSize, bytes, a positive integer),
// prefetch (Options.Prefetch, 1 to 65535) and max_priority
// (Options.MaxPriority, 1 to 255; 4 for claimcheck's priorities). The parameters amqp091-go reads
// itself (heartbeat, connection_timeout in milliseconds, which sets
// Options.DialTimeout, channel_max, auth_mechanism, certfile, keyfile,
// cacertfile, server_name_indication) are passed on with the rest of the
// URL. Any other parameter, a repeated parameter or a value that does not
// parse is an error wrapping claimcheck.ErrConfig. Error strings never
// contain the password.
package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// DefaultMaxMessageSize is the default MaxMessageSize: SQS's default, so a
// message that fits one fits the other.
const DefaultMaxMessageSize = 256 << 10

// DefaultDialTimeout is the default Options.DialTimeout.
const DefaultDialTimeout = 5 * time.Second

// DefaultPrefetch is the default Options.Prefetch.
const DefaultPrefetch = 32

// RedialInterval is how long a failed dial is remembered: calls that need
// the connection within this time after a dial failed get that dial's
// error at once, without dialling again.
const RedialInterval = 500 * time.Millisecond

const attemptHeader = "claimcheck-attempt"

// maxMessageID is the longest AMQP message-id (a short string).
const maxMessageID = 255

// Options configure Open.
type Options struct {
	// Queue is the queue's name (Q above). Required; must not start with
	// "amq." (reserved by RabbitMQ).
	Queue string
	// MaxMessageSize in bytes, counted by broker.Size. Zero or negative
	// means DefaultMaxMessageSize.
	MaxMessageSize int64
	// Prefetch is the most unacked deliveries held at once by each of
	// Receive and ReceiveDead (AMQP basic.qos prefetch-count, at most
	// 65535). Zero or negative means DefaultPrefetch.
	Prefetch int
	// DialTimeout bounds every dial, first and re-dials alike: TCP connect,
	// TLS and AMQP handshakes. Zero or negative means the URL's
	// connection_timeout parameter if set, else DefaultDialTimeout.
	DialTimeout time.Duration
	// Exchange, if set, is a durable fanout exchange: Publish sends to it
	// instead of to Queue, and the broker copies every message to each
	// queue bound to it. Open declares it and binds Queue to it. Must not
	// start with "amq.".
	Exchange string
	// FanOut lists every queue Exchange copies to, Queue included, so
	// that each copy's payload reference can be counted (broker.FanOut):
	// Open declares each one's topology as it does Queue's and binds it, so
	// no copy is lost to a queue not bound yet. Empty with an Exchange: the
	// fan-out is unknown (queues bound by others), and consumers refuse
	// deletion on acknowledgement. Requires Exchange.
	FanOut []string
	// MaxPriority, 1 to 255, declares Q as a classic priority queue with
	// x-max-priority = MaxPriority (see the package doc); 4 covers
	// claimcheck's four priorities, and RabbitMQ recommends few levels.
	// 0 declares the quorum queue, without priorities.
	MaxPriority int
}

// Transport is a broker.Transport over one RabbitMQ queue. It reconnects by
// itself (see the package doc). Its methods are safe for concurrent use.
type Transport struct {
	opts     Options
	url      string      // holds the password: never put it in an error
	redacted string      // url with the password hidden, for errors
	cfg      amqp.Config // every dial starts from a copy

	connMu      sync.Mutex
	conn        *amqp.Connection // nil once seen closed, until the next dial
	gen         uint64           // connection generation: +1 per successful dial
	closes      chan *amqp.Error // conn.NotifyClose
	lost        string           // why the previous connection closed, for errors
	dialing     chan struct{}    // closed when the dial in flight ends; nil if none
	dialErr     error            // the last failed dial ...
	dialRetryAt time.Time        // ... returned as is until then
	closed      bool             // Close was called

	pubMu  sync.Mutex
	pub    *amqp.Channel // confirm mode; nil before the first Publish
	pubGen uint64        // connection generation pub was opened on

	main consumer // Receive, on Q
	dead consumer // ReceiveDead, on Q.dead
}

// consumer is one consuming channel. mu is held by Receive while it waits.
type consumer struct {
	mu    sync.Mutex
	queue string
	ch    *amqp.Channel
	dels  <-chan amqp.Delivery // nil when it must be (re)opened
	gen   uint64               // connection generation ch was opened on
}

// handle is broker.Delivery.Handle: the AMQP delivery with the channel and
// connection generation it arrived on, which alone can settle it.
type handle struct {
	t   *Transport
	d   amqp.Delivery
	ch  *amqp.Channel
	gen uint64
}

var _ broker.Transport = (*Transport)(nil)
var _ broker.DeadLetterReader = (*Transport)(nil)
var _ broker.QueueNamer = (*Transport)(nil)
var _ broker.FanOut = (*Transport)(nil)

// errClosed is returned by every method after Close.
var errClosed = errors.New("rabbitmq: transport closed")

// Open connects to rawURL (amqp://user:pass@host:port/vhost, or amqps://)
// and declares the topology for opts.Queue. Declaring is idempotent. The
// Transport keeps rawURL to reconnect after an outage (see the package doc).
//
// Errors: claimcheck.ErrConfig for invalid options, a URL amqp091-go cannot
// parse, or a queue declared before with other arguments (the broker's
// PRECONDITION_FAILED); claimcheck.ErrAccessDenied when the broker refuses
// the credentials or the vhost; claimcheck.ErrUnavailable when the broker
// cannot be reached within opts.DialTimeout or before ctx is done. Error
// strings never contain the password.
func Open(ctx context.Context, rawURL string, opts Options) (*Transport, error) {
	redacted := broker.RedactURL(rawURL)
	if opts.Queue == "" || strings.HasPrefix(opts.Queue, "amq.") {
		return nil, fmt.Errorf("rabbitmq: invalid queue name %q: %w", opts.Queue, claimcheck.ErrConfig)
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if opts.Prefetch <= 0 {
		opts.Prefetch = DefaultPrefetch
	}
	if opts.MaxPriority < 0 || opts.MaxPriority > 255 {
		return nil, fmt.Errorf("rabbitmq: max priority %d: use 1 to 255, or 0 for a queue without priorities: %w", opts.MaxPriority, claimcheck.ErrConfig)
	}
	if opts.Prefetch > 65535 {
		return nil, fmt.Errorf("rabbitmq: prefetch %d is more than AMQP allows (65535): %w", opts.Prefetch, claimcheck.ErrConfig)
	}
	if err := checkFanOut(opts); err != nil {
		return nil, err
	}
	uri, err := amqp.ParseURI(rawURL)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) { // its text quotes the URL, password included
			return nil, fmt.Errorf("rabbitmq: %s is not an AMQP URL: %w", redacted, claimcheck.ErrConfig)
		}
		return nil, fmt.Errorf("rabbitmq: %s is not an AMQP URL: %v: %w", redacted, err, claimcheck.ErrConfig)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
		if uri.ConnectionTimeout > 0 {
			opts.DialTimeout = time.Duration(uri.ConnectionTimeout) * time.Millisecond
		}
	}
	t := &Transport{
		opts: opts, url: rawURL, redacted: redacted,
		cfg:  amqp.Config{Dial: amqp.DefaultDial(opts.DialTimeout)},
		main: consumer{queue: opts.Queue},
		dead: consumer{queue: opts.Queue + ".dead"},
	}
	type result struct {
		conn *amqp.Connection
		err  error
	}
	res := make(chan result, 1)
	go func() {
		conn, err := t.dial()
		res <- result{conn, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		go func() { // do not leak a connection that completes later
			if r := <-res; r.conn != nil {
				r.conn.CloseDeadline(time.Now().Add(opts.DialTimeout))
			}
		}()
		return nil, fmt.Errorf("rabbitmq: connect to %s: %w: %w", redacted, claimcheck.ErrUnavailable, ctx.Err())
	}
	if r.err != nil {
		class := classOf(r.err)
		var aerr *amqp.Error
		if errors.As(r.err, &aerr) && aerr.Code == amqp.PreconditionFailed {
			class = claimcheck.ErrConfig
		}
		return nil, fmt.Errorf("rabbitmq: open %s: %w: %w", redacted, class, r.err)
	}
	t.connMu.Lock()
	t.install(r.conn)
	t.connMu.Unlock()
	// Open the publisher channel now, so that a broker refusing confirm
	// mode is an error of Open.
	if _, err := t.pubChannel(ctx); err != nil {
		t.Close()
		return nil, err
	}
	t.pubMu.Unlock()
	return t, nil
}

// classOf is the claimcheck error class of a dial or channel error:
// ErrAccessDenied for refused credentials or vhost, else ErrUnavailable.
func classOf(err error) error {
	var aerr *amqp.Error
	if errors.Is(err, amqp.ErrCredentials) || errors.Is(err, amqp.ErrVhost) || errors.Is(err, amqp.ErrSASL) ||
		errors.As(err, &aerr) && aerr.Server && (aerr.Code == amqp.AccessRefused || aerr.Code == amqp.NotAllowed) {
		return claimcheck.ErrAccessDenied
	}
	return claimcheck.ErrUnavailable
}

// dial connects and declares the topology. Its errors carry no class.
func (t *Transport) dial() (*amqp.Connection, error) {
	cfg := t.cfg
	// A fresh table each time: amqp091-go writes into it.
	cfg.Properties = amqp.Table{"connection_name": "claimcheck " + t.opts.Queue}
	conn, err := amqp.DialConfig(t.url, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := t.declare(conn); err != nil {
		conn.CloseDeadline(time.Now().Add(t.opts.DialTimeout))
		return nil, err
	}
	return conn, nil
}

// install makes conn the current connection. connMu is held.
func (t *Transport) install(conn *amqp.Connection) {
	t.conn = conn
	t.gen++
	t.closes = conn.NotifyClose(make(chan *amqp.Error, 1))
	t.dialErr, t.lost = nil, ""
}

// Ping implements broker.Pinger: nil while the connection is open, or once
// it is dialled again within ctx; else why not.
func (t *Transport) Ping(ctx context.Context) error {
	_, _, err := t.connection(ctx)
	return err
}

// connection returns the open connection and its generation, dialling again
// if the last one has closed. Concurrent callers share one dial; each waits
// for it at most until its ctx is done.
func (t *Transport) connection(ctx context.Context) (*amqp.Connection, uint64, error) {
	t.connMu.Lock()
	if c, g, ok, err := t.current(); ok || err != nil {
		t.connMu.Unlock()
		return c, g, err
	}
	if t.dialErr != nil && time.Now().Before(t.dialRetryAt) {
		err := t.dialErr
		t.connMu.Unlock()
		return nil, 0, err
	}
	wait := t.dialing
	if wait == nil {
		wait = make(chan struct{})
		t.dialing = wait
		go t.redial(wait)
	}
	t.connMu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("rabbitmq: reconnect to %s%s: %w: %w", t.redacted, t.lostSuffix(), claimcheck.ErrUnavailable, ctx.Err())
	}
	t.connMu.Lock()
	defer t.connMu.Unlock()
	if c, g, ok, err := t.current(); ok || err != nil {
		return c, g, err
	}
	if t.dialErr != nil {
		return nil, 0, t.dialErr
	}
	return nil, 0, fmt.Errorf("rabbitmq: connection to %s lost again right after reconnecting%s: %w", t.redacted, t.lostLocked(), claimcheck.ErrUnavailable)
}

// current returns the open connection (ok), errClosed, or neither when a
// dial is needed; it forgets a connection found closed. connMu is held.
func (t *Transport) current() (*amqp.Connection, uint64, bool, error) {
	if t.closed {
		return nil, 0, false, errClosed
	}
	if t.conn == nil {
		return nil, 0, false, nil
	}
	if !t.conn.IsClosed() {
		return t.conn, t.gen, true, nil
	}
	t.lost = "connection closed"
	select {
	case e, ok := <-t.closes:
		if ok && e != nil {
			t.lost = "connection closed: " + e.Error()
		}
	default:
	}
	t.conn = nil
	return nil, 0, false, nil
}

// redial runs one dial for connection and publishes its outcome.
func (t *Transport) redial(done chan struct{}) {
	conn, err := t.dial()
	t.connMu.Lock()
	t.dialing = nil
	var discard *amqp.Connection
	switch {
	case t.closed:
		discard = conn
	case err != nil:
		t.dialErr = fmt.Errorf("rabbitmq: reconnect to %s%s: %w: %w", t.redacted, t.lostLocked(), classOf(err), err)
		t.dialRetryAt = time.Now().Add(RedialInterval)
	default:
		t.install(conn)
	}
	close(done)
	t.connMu.Unlock()
	if discard != nil {
		discard.CloseDeadline(time.Now().Add(t.opts.DialTimeout))
	}
}

func (t *Transport) lostLocked() string {
	if t.lost == "" {
		return ""
	}
	return " (" + t.lost + ")"
}

func (t *Transport) lostSuffix() string {
	t.connMu.Lock()
	defer t.connMu.Unlock()
	return t.lostLocked()
}

// generation is the current connection generation.
func (t *Transport) generation() uint64 {
	t.connMu.Lock()
	defer t.connMu.Unlock()
	return t.gen
}

func (t *Transport) names() (q, dlx, dead, retry string) { return names(t.opts.Queue) }

func names(q string) (_, dlx, dead, retry string) {
	return q, q + ".dlx", q + ".dead", q + ".retry"
}

// checkFanOut validates Options.Exchange and Options.FanOut.
func checkFanOut(opts Options) error {
	if opts.Exchange == "" {
		if len(opts.FanOut) > 0 {
			return fmt.Errorf("rabbitmq: FanOut %q without an Exchange: %w", opts.FanOut, claimcheck.ErrConfig)
		}
		return nil
	}
	if strings.HasPrefix(opts.Exchange, "amq.") {
		return fmt.Errorf("rabbitmq: invalid exchange name %q: %w", opts.Exchange, claimcheck.ErrConfig)
	}
	if len(opts.FanOut) == 0 {
		return nil
	}
	own := false
	for _, q := range opts.FanOut {
		if q == "" || strings.HasPrefix(q, "amq.") {
			return fmt.Errorf("rabbitmq: invalid queue name %q in FanOut: %w", q, claimcheck.ErrConfig)
		}
		own = own || q == opts.Queue
	}
	if !own {
		return fmt.Errorf("rabbitmq: FanOut %q does not list the queue %q: %w", opts.FanOut, opts.Queue, claimcheck.ErrConfig)
	}
	return nil
}

// declare declares the topology on conn (idempotent): Queue's, and with an
// Exchange, the exchange and every FanOut queue's, each bound to it.
func (t *Transport) declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("declare: %w", err)
	}
	defer ch.Close()
	queues := []string{t.opts.Queue}
	for _, q := range t.opts.FanOut {
		if q != t.opts.Queue {
			queues = append(queues, q)
		}
	}
	for _, q := range queues {
		if err := t.declareQueue(ch, q); err != nil {
			return err
		}
	}
	if t.opts.Exchange == "" {
		return nil
	}
	if err := ch.ExchangeDeclare(t.opts.Exchange, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare exchange %q: %w", t.opts.Exchange, err)
	}
	for _, q := range queues {
		if err := ch.QueueBind(q, "", t.opts.Exchange, false, nil); err != nil {
			return fmt.Errorf("bind %q to exchange %q: %w", q, t.opts.Exchange, err)
		}
	}
	return nil
}

// declareQueue declares the topology of queue q (see the package doc).
func (t *Transport) declareQueue(ch *amqp.Channel, q string) error {
	_, dlx, dead, retry := names(q)
	steps := []func() error{
		func() error { return ch.ExchangeDeclare(dlx, amqp.ExchangeDirect, true, false, false, false, nil) },
		func() error {
			_, err := ch.QueueDeclare(dead, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum})
			return err
		},
		func() error { return ch.QueueBind(dead, q, dlx, false, nil) },
		func() error {
			args := amqp.Table{
				amqp.QueueTypeArg:           amqp.QueueTypeQuorum,
				"x-dead-letter-exchange":    dlx,
				"x-dead-letter-routing-key": q,
			}
			if t.opts.MaxPriority > 0 {
				args[amqp.QueueTypeArg] = amqp.QueueTypeClassic
				args["x-max-priority"] = int32(t.opts.MaxPriority)
			}
			if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
				var aerr *amqp.Error
				if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
					return fmt.Errorf("queue %q exists with other arguments than %s, and RabbitMQ cannot change a queue's arguments (nothing was changed): open it as it was declared, or drain and delete it, or use another queue name: %w",
						q, t.queueShape(), err)
				}
				return err
			}
			return nil
		},
		func() error {
			_, err := ch.QueueDeclare(retry, true, false, false, false, amqp.Table{
				amqp.QueueTypeArg:           amqp.QueueTypeClassic,
				"x-dead-letter-exchange":    "",
				"x-dead-letter-routing-key": q,
			})
			return err
		},
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("declare topology of %q: %w", q, err)
		}
	}
	return nil
}

// queueShape describes the main queue this transport declares, for errors.
func (t *Transport) queueShape() string {
	if t.opts.MaxPriority > 0 {
		return fmt.Sprintf("a classic priority queue with x-max-priority=%d (max_priority=%d)", t.opts.MaxPriority, t.opts.MaxPriority)
	}
	return "a quorum queue without priorities (no max_priority)"
}

// Priorities implements broker.Prioritizer: true when Q is a priority
// queue (Options.MaxPriority).
func (t *Transport) Priorities() bool { return t.opts.MaxPriority > 0 }

// amqpPriority is the AMQP priority of a message with attributes attrs:
// 5-p for its broker.AttrPriority p (1 to 4), 4 when it has none.
func amqpPriority(attrs map[string]string) uint8 {
	p, err := strconv.Atoi(attrs[broker.AttrPriority])
	if err != nil || p < 1 || p > 4 {
		p = 1
	}
	return uint8(5 - p)
}

// MaxMessageSize implements broker.Transport.
func (t *Transport) MaxMessageSize() int64 { return t.opts.MaxMessageSize }

// MessagingSystem is OpenTelemetry's messaging.system: "rabbitmq" (broker.System).
func (t *Transport) MessagingSystem() string { return "rabbitmq" }

// Queue returns the main queue's name.
func (t *Transport) Queue() string { return t.opts.Queue }

// QueueName implements broker.QueueNamer: "amqp:" and the queue's name.
func (t *Transport) QueueName() string { return "amqp:" + t.opts.Queue }

// FanOutQueues implements broker.FanOut: without an Exchange, Queue alone;
// with one, the FanOut queues, or broker.ErrFanOutUnknown if none are
// listed.
func (t *Transport) FanOutQueues() ([]string, error) {
	switch {
	case t.opts.Exchange == "":
		return []string{t.QueueName()}, nil
	case len(t.opts.FanOut) == 0:
		return nil, fmt.Errorf("rabbitmq: exchange %q: %w (list them in Options.FanOut)", t.opts.Exchange, broker.ErrFanOutUnknown)
	}
	qs := make([]string, len(t.opts.FanOut))
	for i, q := range t.opts.FanOut {
		qs[i] = "amqp:" + q
	}
	return qs, nil
}

type outMsg struct {
	exchange, key string
	pub           amqp.Publishing
}

// Publish implements broker.Transport: persistent messages to Q (or to
// Options.Exchange, which copies them to its queues), each confirmed by the
// broker. A message's broker.AttrID attribute, if set and
// at most 255 bytes, is its AMQP message-id; otherwise the message-id is
// random. Every attribute is also sent as a header.
//
// Errors: broker.ErrMessageTooLarge (wrapped) before anything is sent;
// otherwise a *broker.PublishError naming every message not confirmed,
// each failure wrapping claimcheck.ErrUnavailable: the broker could not be
// reached, the channel or connection closed before the confirm, the broker
// nacked it, or ctx was done first (the failure then also wraps ctx.Err()).
// Exceptions: ErrAccessDenied instead when reconnecting is refused for the
// credentials or vhost, and no class after Close.
func (t *Transport) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckSize(msgs, t.opts.MaxMessageSize); err != nil {
		return err
	}
	out := make([]outMsg, len(msgs))
	for i, m := range msgs {
		h := amqp.Table{}
		for k, v := range m.Attributes {
			h[k] = v
		}
		id := m.Attributes[broker.AttrID]
		if id == "" || len(id) > maxMessageID {
			id = newID()
		}
		exchange, key := "", t.opts.Queue
		if t.opts.Exchange != "" {
			exchange, key = t.opts.Exchange, ""
		}
		out[i] = outMsg{exchange, key, amqp.Publishing{
			Headers: h, Body: m.Body, DeliveryMode: amqp.Persistent, Priority: amqpPriority(m.Attributes),
			MessageId: id, Timestamp: time.Now().UTC(), ContentType: "application/json",
		}}
	}
	return t.publish(ctx, out)
}

// pubChannel returns the open publisher channel, reopening it (and the
// connection) if it has closed. On success pubMu is held; the caller
// unlocks it. No lock is held while waiting for a dial.
func (t *Transport) pubChannel(ctx context.Context) (*amqp.Channel, error) {
	for {
		t.pubMu.Lock()
		if t.pub != nil && !t.pub.IsClosed() {
			return t.pub, nil
		}
		t.pubMu.Unlock()
		conn, gen, err := t.connection(ctx)
		if err != nil {
			return nil, err
		}
		t.pubMu.Lock()
		if t.pub != nil && !t.pub.IsClosed() {
			return t.pub, nil // another caller reopened it meanwhile
		}
		if conn.IsClosed() {
			t.pubMu.Unlock()
			continue // lost again: connection dials once more, or fails
		}
		if t.pub != nil && t.pubGen == gen {
			// The broker closed the channel on a live connection (a
			// channel error, such as publishing to a deleted exchange):
			// declare again in case the topology is gone.
			if err := t.declare(conn); err != nil {
				t.pubMu.Unlock()
				return nil, fmt.Errorf("rabbitmq: publisher channel: %w: %w", classOf(err), err)
			}
		}
		ch, err := conn.Channel()
		if err == nil {
			if err = ch.Confirm(false); err != nil {
				ch.Close()
			}
		}
		if err != nil {
			t.pubMu.Unlock()
			return nil, fmt.Errorf("rabbitmq: publisher channel: %w: %w", classOf(err), err)
		}
		t.pub, t.pubGen = ch, gen
		return ch, nil
	}
}

// publish sends out on the confirm channel and waits for every confirm.
// pubMu is held only while sending: concurrent calls wait for their
// confirms in parallel.
func (t *Transport) publish(ctx context.Context, out []outMsg) error {
	perr := &broker.PublishError{Failed: map[int]error{}, Total: len(out)}
	failRest := func(from int, err error) {
		for i := from; i < len(out); i++ {
			perr.Failed[i] = err
		}
	}
	if err := ctx.Err(); err != nil {
		failRest(0, fmt.Errorf("rabbitmq: not sent: %w: %w", claimcheck.ErrUnavailable, err))
		return perr
	}
	ch, err := t.pubChannel(ctx)
	if err != nil {
		failRest(0, err)
		return perr
	}
	confs := make([]*amqp.DeferredConfirmation, len(out))
	for i, m := range out {
		if err := ctx.Err(); err != nil {
			failRest(i, fmt.Errorf("rabbitmq: not sent: %w: %w", claimcheck.ErrUnavailable, err))
			break
		}
		dc, err := ch.PublishWithDeferredConfirm(m.exchange, m.key, false, false, m.pub)
		if err != nil {
			err = fmt.Errorf("rabbitmq: send: %w: %w", claimcheck.ErrUnavailable, err)
			if ch.IsClosed() {
				failRest(i, err)
				break
			}
			perr.Failed[i] = err
			continue
		}
		confs[i] = dc
	}
	t.pubMu.Unlock()
	for i, dc := range confs {
		if dc == nil {
			continue
		}
		select {
		case <-dc.Done():
		default:
			select {
			case <-dc.Done():
			case <-ctx.Done():
				perr.Failed[i] = fmt.Errorf("rabbitmq: no confirm yet (may or may not be delivered): %w: %w", claimcheck.ErrUnavailable, ctx.Err())
				continue
			}
		}
		switch {
		case dc.Acked():
		case ch.IsClosed():
			// amqp091-go nacks every outstanding confirm when the channel
			// closes: the broker may or may not have the message.
			perr.Failed[i] = fmt.Errorf("rabbitmq: channel closed before the broker confirmed (may or may not be delivered)%s: %w", t.lostSuffix(), claimcheck.ErrUnavailable)
		default:
			perr.Failed[i] = fmt.Errorf("rabbitmq: nacked by the broker: %w", claimcheck.ErrUnavailable)
		}
	}
	if len(perr.Failed) > 0 {
		return perr
	}
	return nil
}

// Receive implements broker.Transport. If the consumer's channel or the
// connection has closed, Receive reopens it (dialling again if needed)
// before waiting.
//
// Errors: ctx.Err() once ctx is done; an error wrapping
// claimcheck.ErrUnavailable when the broker cannot be reached or the
// consumer closes again right after being reopened (ErrAccessDenied when
// reconnecting is refused for the credentials or vhost); an error of no
// class after Close.
// Deliveries already returned from a channel that then closed are
// redelivered by the broker (see the package doc).
func (t *Transport) Receive(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, &t.main, max)
}

// ReceiveDead implements broker.DeadLetterReader: deliveries from Q.dead,
// with Receive's reconnection and errors.
func (t *Transport) ReceiveDead(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, &t.dead, max)
}

func (t *Transport) receive(ctx context.Context, c *consumer, max int) ([]*broker.Delivery, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max <= 0 {
		max = 1
	}
	// At most two rounds: a consumer found closed is reopened once per call,
	// so a broker that keeps closing it cannot make Receive spin.
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if c.dels == nil || c.ch.IsClosed() {
			if err := t.openConsumer(ctx, c); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				return nil, err
			}
		}
		var out []*broker.Delivery
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case d, ok := <-c.dels:
			if !ok {
				c.dels = nil
				if round > 0 {
					return nil, fmt.Errorf("rabbitmq: consumer of %q closed again right after reopening%s: %w", c.queue, t.lostSuffix(), claimcheck.ErrUnavailable)
				}
				continue
			}
			out = append(out, t.toDelivery(d, c))
		}
		for len(out) < max {
			select {
			case d, ok := <-c.dels:
				if !ok {
					c.dels = nil
					return out, nil
				}
				out = append(out, t.toDelivery(d, c))
			default:
				return out, nil
			}
		}
		return out, nil
	}
}

// openConsumer (re)opens c's channel and consumer. c.mu is held.
func (t *Transport) openConsumer(ctx context.Context, c *consumer) error {
	conn, gen, err := t.connection(ctx)
	if err != nil {
		return err
	}
	if c.ch != nil && c.gen == gen {
		// Closed or cancelled on a live connection (a channel error, the
		// queue deleted): close what is left, declare again.
		c.ch.Close()
		if err := t.declare(conn); err != nil {
			return fmt.Errorf("rabbitmq: consume %q: %w: %w", c.queue, classOf(err), err)
		}
	}
	c.ch, c.dels = nil, nil
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: consumer channel: %w: %w", classOf(err), err)
	}
	// On failure c keeps the closed channel with this generation, so that
	// the next attempt declares the topology again first.
	if err := ch.Qos(t.opts.Prefetch, 0, false); err != nil {
		ch.Close()
		c.ch, c.gen = ch, gen
		return fmt.Errorf("rabbitmq: qos: %w: %w", classOf(err), err)
	}
	dels, err := ch.Consume(c.queue, "", false, false, false, false, nil)
	if err != nil {
		ch.Close()
		c.ch, c.gen = ch, gen
		return fmt.Errorf("rabbitmq: consume %q: %w: %w", c.queue, classOf(err), err)
	}
	c.ch, c.dels, c.gen = ch, dels, gen
	return nil
}

func (t *Transport) toDelivery(d amqp.Delivery, c *consumer) *broker.Delivery {
	attrs := map[string]string{}
	attempt := 1
	for k, v := range d.Headers {
		switch {
		case k == attemptHeader:
			if n, ok := toInt(v); ok && n > 0 {
				attempt = n
			}
		case strings.HasPrefix(k, "x-"):
		default:
			if s, ok := v.(string); ok {
				attrs[k] = s
			}
		}
	}
	if n, ok := toInt(d.Headers["x-delivery-count"]); ok && n > 0 {
		attempt += n
	} else if d.Redelivered && t.opts.MaxPriority > 0 {
		attempt++ // a classic queue counts no deliveries (see the package doc)
	}
	id := attrs[broker.AttrID]
	if id == "" {
		id = d.MessageId
	}
	if id == "" {
		id = strconv.FormatUint(d.DeliveryTag, 10)
	}
	return &broker.Delivery{
		Message: broker.Message{Body: d.Body, Attributes: attrs}, ID: id, Attempt: attempt,
		Handle: &handle{t: t, d: d, ch: c.ch, gen: c.gen},
	}
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int8:
		return int(n), true
	case int16:
		return int(n), true
	case int32:
		return int(n), true
	case int64:
		return int(n), true
	case uint8:
		return int(n), true
	case uint16:
		return int(n), true
	case uint32:
		return int(n), true
	}
	return 0, false
}

// settleable returns d's handle, or an error wrapping
// claimcheck.ErrUnavailable if d arrived on a channel that has closed.
func (t *Transport) settleable(op string, d *broker.Delivery) (*handle, error) {
	h, ok := d.Handle.(*handle)
	if !ok || h == nil || h.t != t {
		return nil, fmt.Errorf("rabbitmq: %s %s: delivery not from this transport", op, d.ID)
	}
	if gen := t.generation(); h.gen != gen || h.ch.IsClosed() {
		return nil, t.staleError(op, d, h, gen)
	}
	return h, nil
}

func (t *Transport) staleError(op string, d *broker.Delivery, h *handle, gen uint64) error {
	where := "on a channel that has closed since"
	if h.gen != gen {
		where = fmt.Sprintf("on connection %d of this transport, replaced since by connection %d", h.gen, gen)
	}
	return fmt.Errorf("rabbitmq: %s %s: it was delivered %s; it cannot be settled and the broker will redeliver it: %w",
		op, d.ID, where, claimcheck.ErrUnavailable)
}

// Ack implements broker.Transport.
//
// Errors: wrapping claimcheck.ErrUnavailable if d arrived on a channel that
// has closed since (the broker will redeliver it) or the ack cannot be
// sent.
func (t *Transport) Ack(_ context.Context, d *broker.Delivery) error {
	h, err := t.settleable("ack", d)
	if err != nil {
		return err
	}
	return t.ack(d, h)
}

func (t *Transport) ack(d *broker.Delivery, h *handle) error {
	if err := h.d.Ack(false); err != nil {
		if h.ch.IsClosed() {
			return t.staleError("ack", d, h, t.generation())
		}
		return fmt.Errorf("rabbitmq: ack %s: %w: %w", d.ID, claimcheck.ErrUnavailable, err)
	}
	return nil
}

// copyOf republishes d's message with its claimcheck headers and extra.
func copyOf(ad amqp.Delivery, extra amqp.Table) amqp.Publishing {
	h := amqp.Table{}
	for k, v := range ad.Headers {
		if !strings.HasPrefix(k, "x-") {
			h[k] = v
		}
	}
	for k, v := range extra {
		h[k] = v
	}
	return amqp.Publishing{
		Headers: h, Body: ad.Body, DeliveryMode: amqp.Persistent, MessageId: ad.MessageId,
		Timestamp: ad.Timestamp, ContentType: ad.ContentType, Priority: ad.Priority,
	}
}

// Retry implements broker.Transport through Q.retry (see the package doc).
// The delay is rounded down to whole milliseconds.
//
// Errors: wrapping claimcheck.ErrUnavailable if d arrived on a channel that
// has closed since (nothing is published; the broker will redeliver it), if
// the copy is not confirmed, or if the original cannot be acked after the
// copy was confirmed (it will then be delivered twice).
func (t *Transport) Retry(ctx context.Context, d *broker.Delivery, delay time.Duration) error {
	h, err := t.settleable("retry", d)
	if err != nil {
		return err
	}
	p := copyOf(h.d, amqp.Table{attemptHeader: int32(d.Attempt + 1)})
	p.Expiration = strconv.FormatInt(max(delay.Milliseconds(), 0), 10)
	_, _, _, retry := t.names()
	if err := t.publish(ctx, []outMsg{{"", retry, p}}); err != nil {
		return fmt.Errorf("rabbitmq: retry %s: %w", d.ID, err)
	}
	return t.ack(d, h)
}

// DeadLetter implements broker.Transport through Q.dlx (see the package
// doc).
//
// Errors: as Retry's.
func (t *Transport) DeadLetter(ctx context.Context, d *broker.Delivery, reason string) error {
	h, err := t.settleable("dead-letter", d)
	if err != nil {
		return err
	}
	p := copyOf(h.d, amqp.Table{broker.AttrReason: reason, attemptHeader: int32(d.Attempt)})
	q, dlx, _, _ := t.names()
	if err := t.publish(ctx, []outMsg{{dlx, q, p}}); err != nil {
		return fmt.Errorf("rabbitmq: dead-letter %s: %w", d.ID, err)
	}
	return t.ack(d, h)
}

// Extend implements broker.Transport: a no-op (see the package doc).
func (t *Transport) Extend(context.Context, *broker.Delivery, time.Duration) error { return nil }

// Close implements broker.Transport. It closes the connection (waiting at
// most Options.DialTimeout for the broker's reply) and ends every blocked
// call; afterwards every method fails and nothing reconnects. Closing twice
// is a no-op.
func (t *Transport) Close() error {
	t.connMu.Lock()
	if t.closed {
		t.connMu.Unlock()
		return nil
	}
	t.closed = true
	conn := t.conn
	t.conn = nil
	t.connMu.Unlock()
	if conn == nil {
		return nil
	}
	if err := conn.CloseDeadline(time.Now().Add(t.opts.DialTimeout)); err != nil && !errors.Is(err, amqp.ErrClosed) {
		return fmt.Errorf("rabbitmq: close: %w", err)
	}
	return nil
}

// DeleteTopology deletes Q, Q.retry, Q.dead and Q.dlx with whatever they
// hold, and Options.Exchange if set (for tests and teardown). It reconnects like the other methods.
func (t *Transport) DeleteTopology() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*t.opts.DialTimeout)
	defer cancel()
	conn, _, err := t.connection(ctx)
	if err != nil {
		return fmt.Errorf("rabbitmq: delete topology: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("rabbitmq: delete topology: %w", err)
	}
	defer ch.Close()
	q, dlx, dead, retry := t.names()
	var errs []error
	for _, name := range []string{q, retry, dead} {
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ch.ExchangeDelete(dlx, false, false); err != nil {
		errs = append(errs, err)
	}
	if t.opts.Exchange != "" {
		if err := ch.ExchangeDelete(t.opts.Exchange, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
