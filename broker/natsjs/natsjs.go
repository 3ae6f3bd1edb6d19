// Package natsjs is a broker.Transport over NATS JetStream (nats.go's
// jetstream package).
//
// Topology, for Options{Stream: S, Subject: T, Consumer: C}:
//
//   - S: a file-storage stream on the literal subject T with work-queue
//     retention (a message is removed once acknowledged or terminated), so a
//     Transport is one queue, as on RabbitMQ and SQS. Fan-out is one stream
//     per subscriber. Its duplicate window (StreamConfig.Duplicates) is
//     Options.DuplicateWindow, default DefaultDuplicateWindow (2 minutes).
//     T defaults to DefaultSubject(S): "claimcheck.S.jobs" (the stream
//     name's case kept), except "claimcheck.jobs" for the stream
//     "CLAIMCHECK" (DefaultURLStream), as in earlier versions. Streams of
//     different names thus get subjects that never overlap, so several
//     can live on one server without naming their subjects.
//   - C: a durable pull consumer on S with explicit ack, AckWait and
//     MaxDeliver from Options.
//   - S_DEAD on subject T.dead (Options.DeadStream, Options.DeadSubject): the
//     dead-letter stream, file storage, work-queue retention, the same
//     duplicate window, read through the durable pull consumer C_DEAD
//     (ReceiveDead).
//
// Existing streams: Open creates a stream that does not exist. A stream
// that exists (S or S_DEAD) must already have exactly the settings
// claimcheck depends on: its one subject (T, or T.dead), work-queue
// retention and file storage. If one differs, Open fails with an error
// wrapping claimcheck.ErrConfig that names the stream, its current
// settings and the requested ones, and changes neither stream (as RabbitMQ
// refuses to redeclare a queue with other arguments: PRECONDITION_FAILED).
// Changing a stream's subjects would take them from the publishers that
// use them; changing its retention or storage would change what the queue
// keeps. To move a queue, use another stream name or delete the stream.
// Both streams are checked before either is created or updated. The
// other settings of an existing stream (limits, replicas, placement,
// description) are left as they are, except its duplicate window: Open
// sets it to Options.DuplicateWindow when it differs (harmless to
// publishers: it only changes how long a Nats-Msg-Id is remembered), so
// the last process to Open a stream decides its window. The consumers C
// and C_DEAD are created, or updated to the Options' AckWait and
// MaxDeliver.
//
// Choices:
//   - Publish sends every message with PublishMsgAsync (expecting stream S)
//     and waits for every PubAck; a message without one is named in a
//     broker.PublishError. The Nats-Msg-Id of a message is its
//     broker.AttrID attribute if it has a non-empty one (at most MaxIDLen
//     bytes), otherwise a random id. JetStream confirms a message published
//     again with a Nats-Msg-Id it stored less than the duplicate window ago
//     (PubAck.Duplicate) without storing it again: publishing one outbox
//     entry twice within the window yields one delivery; after it, two
//     (suppressed by an Inbox). Messages without AttrID are never
//     deduplicated.
//   - Attributes are NATS headers, name and value unchanged (nats.go keeps
//     header case). Names must be non-empty, without ':', spaces or control
//     characters, and not start with "Nats-"; values must not contain CR or
//     LF or begin or end with blanks (NATS trims them). Headers starting with
//     "Nats-" are not returned as attributes.
//   - Receive pulls one message with a bounded wait (Options.FetchWait, cut
//     to the context's deadline so no message is pulled and then abandoned),
//     then whatever else is immediately available, up to max. A cancelled
//     context without a deadline is noticed within FetchWait.
//   - Ack is DoubleAck (the server confirms). Retry is NakWithDelay, Extend
//     InProgress, each followed by a flush of the connection.
//   - DeadLetter publishes a copy (headers kept, plus claimcheck-reason) to
//     T.dead, waits for its PubAck from S_DEAD, then terminates the original
//     with a plain "+TERM", sent as a request the server answers once it is
//     settled (nats-server 2.9 ignores the "+TERM <reason>" form, so the
//     reason travels only in the copy). If the process dies between the two, the original is
//     redelivered after AckWait and dead-lettered again; the copy keeps the
//     original's Nats-Msg-Id, so S_DEAD stores it once if that happens
//     within the duplicate window.
//   - Attempt is the consumer's NumDelivered for the message: retries and
//     redeliveries after AckWait both count.
//   - ID is the Nats-Msg-Id header (so the AttrID where the producer set
//     one; stable across retries), or S:sequence for a message published
//     without one by another client.
//   - MaxMessageSize counts broker.Size. The NATS wire size of a message is
//     smaller than broker.Size plus a small fixed header overhead; Open keeps
//     HeaderReserve bytes of the server's max_payload for it (and for the
//     Nats-Msg-Id and Nats-Expected-Stream headers and the reason header of
//     a dead-letter copy). Default: 256 KiB or max_payload minus
//     HeaderReserve, whichever is smaller; more than that is ErrConfig.
//   - MaxDeliver defaults to unlimited: broker.Consume counts attempts and
//     dead-letters. A server-side MaxDeliver below ConsumeOptions.Policy.MaxAttempts
//     makes JetStream stop delivering a message without a dead letter.
//
// Connection loss: nats.go reconnects by itself, configured by Open for a
// long-running service: without limit on attempts (nats.MaxReconnects(-1)),
// Options.ReconnectWait apart (plus nats.go's default jitter: up to 100 ms,
// 1 s with TLS), a ping every 20 s with at most 3 unanswered (a connection that died
// silently is noticed within about a minute; one closed by the network or
// the server, at once), and no reconnect buffer (nats.ReconnectBufSize(-1):
// nats.go's default, which a value of 0 also selects, would queue up to
// 8 MiB of publishes while disconnected and send them on reconnection, long
// after Publish gave up). Once nats.go has noticed the loss, until it has
// reconnected:
//
//   - Publish fails at once, every message named in the
//     broker.PublishError. A message whose PubAck was pending when the loss
//     was noticed fails then with nats.ErrDisconnected; it may have been
//     stored (publish it again: JetStream deduplicates it if it has an
//     AttrID). A PubAck never comes on a connection that died silently:
//     Publish then fails when ctx is done or after 30 s.
//   - Receive and ReceiveDead fail at once; a pull in progress when the
//     connection is lost ends within FetchWait plus one second, and Receive
//     then fails.
//   - Ack, Retry, DeadLetter and Extend fail at once; the delivery is
//     redelivered after AckWait.
//
// Those errors wrap claimcheck.ErrUnavailable (test with errors.Is), as do
// timeouts, a context done before a PubAck or a settlement's confirmation,
// and JetStream answering 503 or not at all (no stream for the subject);
// credentials the server refuses wrap claimcheck.ErrAccessDenied. No call
// waits for the reconnection: callers back off and call again on the same
// Transport, which works again once nats.go has reconnected.
//
// URLs: importing the package registers the "nats" scheme with broker.Open;
// see OpenURL.
package natsjs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

// DefaultMaxMessageSize is the default MaxMessageSize (SQS's default), if
// the server's max_payload allows it.
const DefaultMaxMessageSize = 256 << 10

// HeaderReserve is the part of the server's max_payload kept for NATS header
// framing, the Nats-Msg-Id and Nats-Expected-Stream headers and a dead
// letter's reason header.
const HeaderReserve = 1 << 10

// MaxIDLen is the longest broker.AttrID, in bytes, that Publish accepts: it
// is sent twice (as the attribute and as Nats-Msg-Id), and only the
// attribute is counted by broker.Size.
const MaxIDLen = 256

// Default option values. DefaultAckWait is short because broker.Consume
// extends every held delivery every third of it while its handler runs: it
// bounds only how long the job of a crashed worker waits (about 1 min).
const (
	DefaultAckWait         = time.Minute
	DefaultFetchWait       = time.Second
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultReconnectWait   = 2 * time.Second
)

// Connection settings for a long-running service; see the package doc.
const (
	dialTimeout  = 10 * time.Second
	pingInterval = 20 * time.Second
	maxPingsOut  = 3
)

// Options configure Open.
type Options struct {
	// Stream is the stream's name. Required: letters, digits, '-' and '_'.
	Stream string
	// Subject is the literal subject messages are published to. Default
	// DefaultSubject(Stream). An existing stream must have exactly this
	// subject (see the package doc).
	Subject string
	// Consumer is the durable pull consumer's name. Required, like Stream.
	Consumer string
	// DeadStream and DeadSubject name the dead-letter stream and its
	// subject. Default Stream+"_DEAD" and Subject+".dead".
	DeadStream, DeadSubject string
	// MaxMessageSize in bytes, counted by broker.Size. Default
	// DefaultMaxMessageSize or the server's max_payload minus HeaderReserve,
	// whichever is smaller; more than the latter is ErrConfig.
	MaxMessageSize int64
	// MaxDeliver is the consumer's MaxDeliver. Default unlimited; see the
	// package doc.
	MaxDeliver int
	// AckWait is how long a delivery stays unsettled before JetStream
	// redelivers it (Extend restarts it). Default DefaultAckWait. It must
	// exceed a batch's worth of work in broker.Consume.
	AckWait time.Duration
	// FetchWait bounds one pull request of Receive. Default
	// DefaultFetchWait.
	FetchWait time.Duration
	// DuplicateWindow is both streams' duplicate window (StreamConfig.
	// Duplicates): a message published with the Nats-Msg-Id of one stored
	// less than this long ago is confirmed but not stored again. Default
	// DefaultDuplicateWindow; negative is ErrConfig. JetStream keeps the
	// ids of the window in memory.
	DuplicateWindow time.Duration
	// ReconnectWait is how long nats.go waits between two attempts to
	// reconnect to the same server (nats.ReconnectWait). Default
	// DefaultReconnectWait; negative is ErrConfig.
	ReconnectWait time.Duration
}

// Transport is a broker.Transport over one JetStream stream and consumer.
type Transport struct {
	opts Options
	nc   *nats.Conn
	js   jetstream.JetStream
	con  jetstream.Consumer
	dead jetstream.Consumer
}

var _ broker.Transport = (*Transport)(nil)
var _ broker.DeadLetterReader = (*Transport)(nil)
var _ broker.QueueNamer = (*Transport)(nil)
var _ broker.Leaser = (*Transport)(nil)
var _ broker.Pinger = (*Transport)(nil)

// Ping implements broker.Pinger: a round trip to the server (a flush).
func (t *Transport) Ping(ctx context.Context) error {
	if err := t.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("natsjs: ping: %w: %w", claimcheck.ErrUnavailable, err)
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

// Open connects to url (nats://host:port, or a comma-separated list of
// servers, with user:password@ or token@ if the server wants them), creates
// the streams described in the package doc or checks the existing ones,
// creates or updates the consumers and returns the transport, its
// connection set up to reconnect as the package doc describes.
//
// Errors: claimcheck.ErrConfig for invalid options, a URL that does not
// parse, a server whose max_payload is too small for MaxMessageSize, no
// JetStream, an existing stream whose subjects, retention or storage
// differ from the requested ones (see the package doc), or a stream or
// consumer configuration the server refuses;
// claimcheck.ErrUnavailable if the server cannot be reached (10 s to
// connect to each server, ctx not used) or the JetStream API does not answer
// before ctx is done; claimcheck.ErrAccessDenied if the server refuses the
// credentials. Error strings never contain the URL's password or token.
func Open(ctx context.Context, url string, opts Options) (*Transport, error) {
	t, err := open(ctx, url, opts)
	if err != nil {
		return nil, scrub(err, urlSecrets(url))
	}
	return t, nil
}

func open(ctx context.Context, url string, opts Options) (*Transport, error) {
	if opts.Subject == "" {
		opts.Subject = DefaultSubject(opts.Stream)
	}
	if opts.DeadStream == "" {
		opts.DeadStream = opts.Stream + "_DEAD"
	}
	if opts.DeadSubject == "" {
		opts.DeadSubject = opts.Subject + ".dead"
	}
	for _, n := range []string{opts.Stream, opts.Consumer, opts.DeadStream} {
		if !validName(n) {
			return nil, fmt.Errorf("natsjs: invalid stream or consumer name %q: %w", n, claimcheck.ErrConfig)
		}
	}
	for _, s := range []string{opts.Subject, opts.DeadSubject} {
		if !validSubject(s) {
			return nil, fmt.Errorf("natsjs: invalid subject %q (must be literal): %w", s, claimcheck.ErrConfig)
		}
	}
	if opts.Stream == opts.DeadStream || opts.Subject == opts.DeadSubject {
		return nil, fmt.Errorf("natsjs: dead-letter stream and subject must differ from the main ones: %w", claimcheck.ErrConfig)
	}
	if opts.AckWait <= 0 {
		opts.AckWait = DefaultAckWait
	}
	if opts.FetchWait <= 0 {
		opts.FetchWait = DefaultFetchWait
	}
	if opts.MaxDeliver <= 0 {
		opts.MaxDeliver = -1
	}
	switch {
	case opts.DuplicateWindow < 0:
		return nil, fmt.Errorf("natsjs: negative DuplicateWindow %v: %w", opts.DuplicateWindow, claimcheck.ErrConfig)
	case opts.DuplicateWindow == 0:
		opts.DuplicateWindow = DefaultDuplicateWindow
	}
	switch {
	case opts.ReconnectWait < 0:
		return nil, fmt.Errorf("natsjs: negative ReconnectWait %v: %w", opts.ReconnectWait, claimcheck.ErrConfig)
	case opts.ReconnectWait == 0:
		opts.ReconnectWait = DefaultReconnectWait
	}
	nc, err := nats.Connect(url,
		nats.Name("claimcheck "+opts.Stream),
		nats.Timeout(dialTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(opts.ReconnectWait),
		nats.ReconnectBufSize(-1), // publishes fail while disconnected
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOut),
	)
	if err != nil {
		return nil, fmt.Errorf("natsjs: connect: %w", (*Transport)(nil).classify(err))
	}
	limit := nc.MaxPayload() - HeaderReserve
	switch {
	case limit <= 0:
		nc.Close()
		return nil, fmt.Errorf("natsjs: server max_payload %d too small: %w", nc.MaxPayload(), claimcheck.ErrConfig)
	case opts.MaxMessageSize <= 0:
		opts.MaxMessageSize = min(DefaultMaxMessageSize, limit)
	case opts.MaxMessageSize > limit:
		nc.Close()
		return nil, fmt.Errorf("natsjs: MaxMessageSize %d exceeds the server's max_payload %d minus %d for headers: %w",
			opts.MaxMessageSize, nc.MaxPayload(), HeaderReserve, claimcheck.ErrConfig)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(publishAckTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("natsjs: jetstream: %w", err)
	}
	t := &Transport{opts: opts, nc: nc, js: js}
	if err := t.declare(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return t, nil
}

// declareError classifies an error of the JetStream API at Open: the
// server refusing a configuration (code 400) or having no JetStream is
// ErrConfig.
func (t *Transport) declareError(err error) error {
	var aerr *jetstream.APIError
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) ||
		errors.As(err, &aerr) && aerr.Code == 400 {
		return fmt.Errorf("%w: %w", err, claimcheck.ErrConfig)
	}
	return t.classify(err)
}

func (t *Transport) declare(ctx context.Context) error {
	o := t.opts
	want := []jetstream.StreamConfig{t.streamConfig(o.Stream, o.Subject), t.streamConfig(o.DeadStream, o.DeadSubject)}
	// Check both streams before touching either, so a refused Open
	// changes nothing.
	have := make([]*jetstream.StreamInfo, len(want))
	for i, w := range want {
		info, err := t.streamInfo(ctx, w.Name)
		if err != nil {
			return err
		}
		if info != nil {
			if err := checkStream(info.Config, w); err != nil {
				return err
			}
		}
		have[i] = info
	}
	for i, w := range want {
		if err := t.ensureStream(ctx, w, have[i]); err != nil {
			return err
		}
	}
	con, err := t.js.CreateOrUpdateConsumer(ctx, o.Stream, jetstream.ConsumerConfig{
		Durable: o.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.AckWait,
		MaxDeliver: o.MaxDeliver, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("natsjs: create consumer %q on %q: %w", o.Consumer, o.Stream, t.declareError(err))
	}
	dead, err := t.js.CreateOrUpdateConsumer(ctx, o.DeadStream, jetstream.ConsumerConfig{
		Durable: o.Consumer + "_DEAD", AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.AckWait,
		MaxDeliver: -1, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("natsjs: create consumer %q on %q: %w", o.Consumer+"_DEAD", o.DeadStream, t.declareError(err))
	}
	t.con, t.dead = con, dead
	return nil
}

// streamConfig is the configuration Open gives a stream it creates.
func (t *Transport) streamConfig(name, subject string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy, Description: "claimcheck",
		Duplicates: t.opts.DuplicateWindow,
	}
}

// streamInfo returns the stream's information, or nil if it does not
// exist.
func (t *Transport) streamInfo(ctx context.Context, name string) (*jetstream.StreamInfo, error) {
	s, err := t.js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("natsjs: stream %q: %w", name, t.declareError(err))
	}
	return s.CachedInfo(), nil
}

// checkStream returns an error wrapping claimcheck.ErrConfig if the
// existing stream's configuration have differs from want in a setting
// claimcheck depends on: its subjects, retention or storage.
func checkStream(have, want jetstream.StreamConfig) error {
	var diffs []string
	if !slices.Equal(have.Subjects, want.Subjects) {
		diffs = append(diffs, fmt.Sprintf("subjects %s, requested %s", quoteList(have.Subjects), quoteList(want.Subjects)))
	}
	if have.Retention != want.Retention {
		diffs = append(diffs, fmt.Sprintf("retention %s, requested %s", have.Retention, want.Retention))
	}
	if have.Storage != want.Storage {
		diffs = append(diffs, fmt.Sprintf("storage %s, requested %s", have.Storage, want.Storage))
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("natsjs: stream %q exists with %s; refusing to change it (use its settings or another stream name, or delete the stream): %w",
		want.Name, strings.Join(diffs, "; "), claimcheck.ErrConfig)
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// ensureStream creates the stream want if have is nil, or sets the
// duplicate window of the existing (checked) stream have, keeping its
// other settings.
func (t *Transport) ensureStream(ctx context.Context, want jetstream.StreamConfig, have *jetstream.StreamInfo) error {
	if have == nil {
		_, err := t.js.CreateStream(ctx, want)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return fmt.Errorf("natsjs: create stream %q: %w", want.Name, t.declareError(err))
		}
		// Created meanwhile by another process, with another
		// configuration: check it as if it had been there.
		if have, err = t.streamInfo(ctx, want.Name); err != nil {
			return err
		}
		if have == nil {
			return fmt.Errorf("natsjs: create stream %q: created and deleted meanwhile: %w", want.Name, claimcheck.ErrUnavailable)
		}
		if err := checkStream(have.Config, want); err != nil {
			return err
		}
	}
	if have.Config.Duplicates == want.Duplicates {
		return nil
	}
	cfg := have.Config
	cfg.Duplicates = want.Duplicates
	if _, err := t.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("natsjs: update duplicate window of stream %q: %w", want.Name, t.declareError(err))
	}
	return nil
}

// MaxMessageSize implements broker.Transport.
func (t *Transport) MaxMessageSize() int64 { return t.opts.MaxMessageSize }

// MessagingSystem is OpenTelemetry's messaging.system: "nats" (broker.System).
func (t *Transport) MessagingSystem() string { return "nats" }

// Options returns the options in effect, defaults filled in.
func (t *Transport) Options() Options { return t.opts }

// Lease implements broker.Leaser: the consumer's AckWait, as the server
// holds it (Options.AckWait, which Open sets on the consumer). Extend
// (InProgress) restarts it.
func (t *Transport) Lease(context.Context) (time.Duration, error) {
	if info := t.con.CachedInfo(); info != nil && info.Config.AckWait > 0 {
		return info.Config.AckWait, nil
	}
	return t.opts.AckWait, nil
}

// QueueName implements broker.QueueNamer: "nats:", the stream's name, "/"
// and the consumer's.
func (t *Transport) QueueName() string { return "nats:" + t.opts.Stream + "/" + t.opts.Consumer }

func checkAttrs(msgs []broker.Message) error {
	for i, m := range msgs {
		for k, v := range m.Attributes {
			if k == "" || strings.ContainsAny(k, ": \t") || strings.HasPrefix(strings.ToLower(k), "nats-") {
				return fmt.Errorf("natsjs: message #%d: invalid header name %q: %w", i, k, claimcheck.ErrConfig)
			}
			for _, r := range k {
				if r < 0x21 || r == 0x7f {
					return fmt.Errorf("natsjs: message #%d: invalid header name %q: %w", i, k, claimcheck.ErrConfig)
				}
			}
			if strings.ContainsAny(v, "\r\n") || strings.TrimSpace(v) != v {
				return fmt.Errorf("natsjs: message #%d: header %q: value %q cannot be carried by NATS: %w", i, k, v, claimcheck.ErrConfig)
			}
		}
		if id := m.Attributes[broker.AttrID]; len(id) > MaxIDLen {
			return fmt.Errorf("natsjs: message #%d: %s of %d bytes, more than %d: %w", i, broker.AttrID, len(id), MaxIDLen, claimcheck.ErrConfig)
		}
	}
	return nil
}

// publishAckTimeout bounds the wait for one PubAck when ctx has no earlier
// deadline.
const publishAckTimeout = 30 * time.Second

// Publish implements broker.Transport: every message to Subject, each
// confirmed by a PubAck from Stream, with its broker.AttrID (or a random
// id) as Nats-Msg-Id.
//
// Errors: broker.ErrMessageTooLarge, or claimcheck.ErrConfig for an
// attribute NATS cannot carry or an AttrID longer than MaxIDLen, before
// anything is sent; otherwise a *broker.PublishError naming every message
// not confirmed, each failure wrapping claimcheck.ErrUnavailable where the
// server was unreachable, did not answer within 30 s or before ctx was
// done, or has no stream for Subject.
func (t *Transport) Publish(ctx context.Context, msgs []broker.Message) error {
	if err := broker.CheckSize(msgs, t.opts.MaxMessageSize); err != nil {
		return err
	}
	if err := checkAttrs(msgs); err != nil {
		return err
	}
	out := make([]*nats.Msg, len(msgs))
	for i, m := range msgs {
		h := nats.Header{}
		for k, v := range m.Attributes {
			h[k] = []string{v}
		}
		if id := m.Attributes[broker.AttrID]; id != "" {
			h[jetstream.MsgIDHeader] = []string{id}
		}
		out[i] = &nats.Msg{Subject: t.opts.Subject, Header: h, Data: m.Body}
	}
	return t.publish(ctx, t.opts.Stream, out)
}

// publish sends out asynchronously, expecting stream, each with its
// Nats-Msg-Id header or a random one, and waits for every PubAck.
func (t *Transport) publish(ctx context.Context, stream string, out []*nats.Msg) error {
	perr := &broker.PublishError{Failed: map[int]error{}, Total: len(out)}
	futs := make([]jetstream.PubAckFuture, len(out))
	for i, m := range out {
		if err := ctx.Err(); err != nil {
			perr.Failed[i] = unavailable(err)
			continue
		}
		if err := t.connErr(); err != nil {
			perr.Failed[i] = err
			continue
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if id == "" {
			id = newID()
		}
		f, err := t.js.PublishMsgAsync(m, jetstream.WithExpectStream(stream), jetstream.WithMsgID(id))
		if err != nil {
			perr.Failed[i] = t.classify(err)
			continue
		}
		futs[i] = f
	}
	for i, f := range futs {
		if f == nil {
			continue
		}
		select {
		case <-f.Ok():
		case err := <-f.Err():
			perr.Failed[i] = t.classify(err)
		case <-ctx.Done():
			perr.Failed[i] = unavailable(fmt.Errorf("no PubAck: %w", ctx.Err()))
		}
	}
	if len(perr.Failed) > 0 {
		return perr
	}
	return nil
}

// Receive implements broker.Transport. While the server is unreachable it
// returns an error wrapping claimcheck.ErrUnavailable (at once, or within
// FetchWait plus one second if the connection is lost during a pull).
func (t *Transport) Receive(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, t.con, max)
}

// ReceiveDead implements broker.DeadLetterReader: deliveries from the
// dead-letter stream, settled with Ack.
func (t *Transport) ReceiveDead(ctx context.Context, max int) ([]*broker.Delivery, error) {
	return t.receive(ctx, t.dead, max)
}

// minFetchWait is the shortest pull request sent; a context with less time
// left waits for its deadline without pulling.
const minFetchWait = 10 * time.Millisecond

func (t *Transport) receive(ctx context.Context, con jetstream.Consumer, max int) ([]*broker.Delivery, error) {
	if max <= 0 {
		max = 1
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait := t.opts.FetchWait
		if dl, ok := ctx.Deadline(); ok {
			// Leave a margin so the server expires the pull request before
			// the context does: a message pulled is never abandoned.
			left := time.Until(dl)
			wait = min(wait, left-min(left/10, 100*time.Millisecond))
			if wait < minFetchWait {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		if err := t.connErr(); err != nil {
			return nil, fmt.Errorf("natsjs: fetch: %w", err)
		}
		start := time.Now()
		batch, err := con.Fetch(1, jetstream.FetchMaxWait(wait))
		if err != nil {
			return nil, fmt.Errorf("natsjs: fetch: %w", t.classify(err))
		}
		out, err := t.drain(batch, nil)
		if err != nil {
			return out, err
		}
		if len(out) == 0 {
			// A pull request ends empty when it expires. Should one
			// end early without an error, wait out its time rather
			// than send pull requests in a tight loop.
			if rest := wait - time.Since(start); rest > wait/2 {
				tm := time.NewTimer(rest)
				select {
				case <-tm.C:
				case <-ctx.Done():
					tm.Stop()
					return nil, ctx.Err()
				}
			}
			continue
		}
		if max > 1 {
			more, err := con.FetchNoWait(max - 1)
			if err != nil {
				return out, nil // the one we have is settled by the caller
			}
			out, _ = t.drain(more, out)
		}
		return out, nil
	}
}

// drain reads batch to its end (bounded by the pull request's expiry).
func (t *Transport) drain(batch jetstream.MessageBatch, out []*broker.Delivery) ([]*broker.Delivery, error) {
	for m := range batch.Messages() {
		out = append(out, toDelivery(m))
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		if len(out) > 0 {
			return out, nil
		}
		return nil, fmt.Errorf("natsjs: fetch: %w", t.classify(err))
	}
	return out, nil
}

func toDelivery(m jetstream.Msg) *broker.Delivery {
	attrs := map[string]string{}
	for k, vs := range m.Headers() {
		if len(vs) == 0 || strings.HasPrefix(strings.ToLower(k), "nats-") {
			continue
		}
		attrs[k] = vs[0]
	}
	attempt := 1
	var id string
	if md, err := m.Metadata(); err == nil {
		if md.NumDelivered > 0 {
			attempt = int(md.NumDelivered)
		}
		id = md.Stream + ":" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	if mid := m.Headers().Get(jetstream.MsgIDHeader); mid != "" {
		id = mid
	}
	return &broker.Delivery{Message: broker.Message{Body: m.Data(), Attributes: attrs}, ID: id, Attempt: attempt, Handle: m}
}

func handle(d *broker.Delivery) (jetstream.Msg, error) {
	m, ok := d.Handle.(jetstream.Msg)
	if !ok || m == nil {
		return nil, errors.New("natsjs: delivery not from this transport")
	}
	return m, nil
}

// Ack implements broker.Transport with DoubleAck: the server confirms
// (within 30 s if ctx has no deadline). Errors wrap claimcheck.ErrUnavailable
// where the server was unreachable or did not confirm in time.
func (t *Transport) Ack(ctx context.Context, d *broker.Delivery) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	if err := t.connErr(); err != nil {
		return fmt.Errorf("natsjs: ack %s: %w", d.ID, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if err := m.DoubleAck(ctx); err != nil {
		return fmt.Errorf("natsjs: ack %s: %w", d.ID, t.classify(err))
	}
	return nil
}

// flush waits until the server has read everything sent so far (at most
// 30 s if ctx has no deadline).
func (t *Transport) flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if err := t.connErr(); err != nil {
		return err
	}
	return t.classify(t.nc.FlushWithContext(ctx))
}

// Retry implements broker.Transport with NakWithDelay. Errors wrap
// claimcheck.ErrUnavailable where the server was unreachable.
func (t *Transport) Retry(ctx context.Context, d *broker.Delivery, delay time.Duration) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	if err := t.connErr(); err != nil {
		return fmt.Errorf("natsjs: retry %s: %w", d.ID, err)
	}
	if delay <= 0 {
		err = m.Nak()
	} else {
		err = m.NakWithDelay(delay)
	}
	if err == nil {
		err = t.flush(ctx)
	}
	if err != nil {
		return fmt.Errorf("natsjs: retry %s: %w", d.ID, t.classify(err))
	}
	return nil
}

// DeadLetter implements broker.Transport: a copy to the dead-letter stream
// with the reason header, confirmed, then Term of the original. Errors wrap
// claimcheck.ErrUnavailable where the server was unreachable.
func (t *Transport) DeadLetter(ctx context.Context, d *broker.Delivery, reason string) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	h := nats.Header{}
	for k, vs := range m.Headers() {
		if strings.HasPrefix(strings.ToLower(k), "nats-") && k != jetstream.MsgIDHeader {
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	h[broker.AttrReason] = []string{strings.TrimSpace(strings.NewReplacer("\r", " ", "\n", " ").Replace(reason))}
	cp := &nats.Msg{Subject: t.opts.DeadSubject, Header: h, Data: m.Data()}
	if err := t.publish(ctx, t.opts.DeadStream, []*nats.Msg{cp}); err != nil {
		return fmt.Errorf("natsjs: dead-letter %s: %w", d.ID, err)
	}
	if err := t.term(ctx, m); err != nil {
		return fmt.Errorf("natsjs: dead-letter %s: term: %w", d.ID, err)
	}
	return nil
}

// ackTerm is JetStream's acknowledgement that settles a message for good
// (the consumer never redelivers it; a work-queue stream removes it). It is
// sent without a reason: nats-server 2.9 compares the acknowledgement with
// "+TERM" byte for byte and silently ignores "+TERM <reason>" (what
// nats.go's TermWithReason sends), so the message would be redelivered
// after AckWait. Measured on nats-server 2.9.10: see
// TestDeadLetterTermOnTheWire. The reason travels in the dead-letter copy.
const ackTerm = "+TERM"

// term sends ackTerm for m as a request: the server answers an
// acknowledgement that carries a reply subject once it has processed it,
// so a nil error means the message is settled (at most 30 s if ctx has no
// deadline).
func (t *Transport) term(ctx context.Context, m jetstream.Msg) error {
	if err := t.connErr(); err != nil {
		return err
	}
	if m.Reply() == "" {
		return errors.New("natsjs: message has no acknowledgement subject")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	if _, err := t.nc.RequestWithContext(ctx, m.Reply(), []byte(ackTerm)); err != nil {
		return t.classify(err)
	}
	return nil
}

// Extend implements broker.Transport with InProgress, which restarts the
// delivery's AckWait (by is not used: the lease is always AckWait). Errors
// wrap claimcheck.ErrUnavailable where the server was unreachable.
func (t *Transport) Extend(ctx context.Context, d *broker.Delivery, _ time.Duration) error {
	m, err := handle(d)
	if err != nil {
		return err
	}
	if err := t.connErr(); err != nil {
		return fmt.Errorf("natsjs: extend %s: %w", d.ID, err)
	}
	if err := m.InProgress(); err != nil {
		return fmt.Errorf("natsjs: extend %s: %w", d.ID, t.classify(err))
	}
	if err := t.flush(ctx); err != nil {
		return fmt.Errorf("natsjs: extend %s: %w", d.ID, err)
	}
	return nil
}

// Close implements broker.Transport.
func (t *Transport) Close() error {
	t.nc.Close()
	return nil
}

// DeleteTopology deletes both streams, their consumers and messages (for
// tests and teardown).
func (t *Transport) DeleteTopology(ctx context.Context) error {
	var errs []error
	for _, s := range []string{t.opts.Stream, t.opts.DeadStream} {
		if err := t.js.DeleteStream(ctx, s); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			errs = append(errs, fmt.Errorf("natsjs: delete stream %q: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
