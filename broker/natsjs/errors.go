package natsjs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimcheck/claimcheck"
)

// classError gives err a claimcheck error class for errors.Is while its
// message and errors.As see the NATS error unchanged.
type classError struct {
	class error
	err   error
}

func (e *classError) Error() string        { return e.err.Error() }
func (e *classError) Unwrap() error        { return e.err }
func (e *classError) Is(target error) bool { return target == e.class }

// unavailable marks err as claimcheck.ErrUnavailable.
func unavailable(err error) error {
	if err == nil || errors.Is(err, claimcheck.ErrUnavailable) {
		return err
	}
	return &classError{class: claimcheck.ErrUnavailable, err: err}
}

// unavailableErrs are the NATS and JetStream errors of a server that cannot
// be reached, or cannot answer now: callers back off and try again.
var unavailableErrs = []error{
	nats.ErrConnectionReconnecting,
	nats.ErrDisconnected,
	nats.ErrReconnectBufExceeded,
	nats.ErrNoServers,
	nats.ErrStaleConnection,
	nats.ErrTimeout,
	nats.ErrNoResponders,
	nats.ErrMaxConnectionsExceeded,
	nats.ErrMaxAccountConnectionsExceeded,
	nats.ErrNoInfoReceived,
	jetstream.ErrNoStreamResponse,
	jetstream.ErrAsyncPublishTimeout,
	jetstream.ErrTooManyStalledMsgs,
	jetstream.ErrConsumerLeadershipChanged,
	jetstream.ErrServerShutdown,
	jetstream.ErrNoHeartbeat,
	context.DeadlineExceeded,
	context.Canceled,
	io.EOF,
	io.ErrUnexpectedEOF,
}

// accessDeniedErrs are the NATS errors of credentials the server refused.
var accessDeniedErrs = []error{
	nats.ErrAuthorization,
	nats.ErrAuthExpired,
	nats.ErrAuthRevoked,
	nats.ErrAccountAuthExpired,
	nats.ErrPermissionViolation,
}

// classify gives err its claimcheck class: ErrAccessDenied for refused
// credentials, ErrConfig for a server URL that does not parse, ErrUnavailable for a server that cannot be reached or cannot
// answer now (disconnected or reconnecting, network errors, timeouts, no
// JetStream responder, a JetStream API error with code 503 other than
// "JetStream not enabled", a cancelled context). Other errors, and errors
// already classified, are returned unchanged.
func (t *Transport) classify(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range []error{claimcheck.ErrUnavailable, claimcheck.ErrAccessDenied, claimcheck.ErrConfig} {
		if errors.Is(err, c) {
			return err
		}
	}
	for _, e := range accessDeniedErrs {
		if errors.Is(err, e) {
			return &classError{class: claimcheck.ErrAccessDenied, err: err}
		}
	}
	for _, e := range unavailableErrs {
		if errors.Is(err, e) {
			return unavailable(err)
		}
	}
	// nats.go fails pending flushes with ErrConnectionClosed when the
	// connection is lost, although it reconnects.
	if errors.Is(err, nats.ErrConnectionClosed) && t != nil && t.nc != nil && !t.nc.IsClosed() {
		return unavailable(err)
	}
	// A URL that does not parse (a *url.Error, which is also a net.Error).
	var uerr *url.Error
	if errors.As(err, &uerr) && uerr.Op == "parse" {
		return &classError{class: claimcheck.ErrConfig, err: err}
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return unavailable(err)
	}
	var aerr *jetstream.APIError
	if errors.As(err, &aerr) && aerr.Code == 503 &&
		aerr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabled && aerr.ErrorCode != jetstream.JSErrCodeJetStreamNotEnabledForAccount {
		return unavailable(err)
	}
	return err
}

// connErr returns an ErrUnavailable error unless the connection is up.
// Checked before every operation, so that none is queued on a connection
// that is reconnecting (nats.go would leak the subscription of a failed
// pull request).
func (t *Transport) connErr() error {
	if t.nc.IsConnected() {
		return nil
	}
	if t.nc.IsClosed() {
		return nats.ErrConnectionClosed
	}
	return unavailable(fmt.Errorf("not connected to the NATS server (%s)", t.nc.Status()))
}

// scrubbedError hides secrets in an error's message; errors.Is and
// errors.As see the original.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub replaces every secret in err's message with "xxxxx".
func scrub(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}

// urlSecrets returns the passwords and tokens in a NATS server URL list
// ("nats://user:pass@host:4222,nats://token@host2"), raw and unescaped. It
// does not need the URLs to parse.
func urlSecrets(servers string) []string {
	var out []string
	add := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		for _, unescape := range []func(string) (string, error){url.PathUnescape, url.QueryUnescape} {
			if u, err := unescape(s); err == nil && u != s && u != "" {
				out = append(out, u)
			}
		}
	}
	for _, part := range strings.Split(servers, ",") {
		part = strings.TrimSpace(part)
		if _, rest, ok := strings.Cut(part, "://"); ok {
			part = rest
		}
		at := strings.LastIndex(part, "@")
		if at < 0 {
			continue
		}
		userinfo := part[:at]
		if _, pass, ok := strings.Cut(userinfo, ":"); ok {
			add(pass)
		} else {
			add(userinfo) // a token, or an nkey or user alone
		}
	}
	return out
}
