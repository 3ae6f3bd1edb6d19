package claimcheck

import (
	"context"
	"errors"
	"fmt"

	"gocloud.dev/gcerrors"
)

// The error classes of claimcheck. Every error returned by this module wraps
// at most one of them; test with errors.Is. IsPermanent tells which classes
// must never be retried, and Reason gives the machine-readable name recorded
// on dead letters.
//
// Permanent (dead-lettered on the first attempt: retrying cannot help):
//   - ErrPayloadMissing: the object behind a ticket does not exist (expired by
//     lifecycle, deleted, or never written).
//   - ErrPayloadCorrupt: the bytes fetched do not match the ticket's size or
//     sha256.
//   - ErrTicketInvalid: the ticket is malformed, truncated, of an unknown
//     major version, or fails validation (bad tenant, key outside its prefix).
//   - ErrPayloadTooLarge: the payload exceeds the configured maximum size.
//   - ErrKeyConflict: a named key already holds different bytes.
//   - ErrTicketForbidden: a ticket for a tenant the worker does not serve,
//     or unsigned or altered when signing is on (a security failure; nothing
//     is fetched).
//   - any error wrapped with Permanent (a handler's own verdict).
//
// Transient (retried with backoff, reported, never treated as "missing"):
//   - ErrAccessDenied: the store refused the credentials (a configuration
//     error that an operator can fix while the job waits).
//   - ErrUnavailable: timeouts, throttling, network failures, cancelled
//     contexts and anything else the store reports; also a broker that
//     cannot be reached (broker transports wrap it).
//   - ErrKeeper: the keeper cannot wrap or unwrap a data key: the wrong
//     key-encryption key (a different --keeper than the one that encrypted
//     the payload), a disabled key, or a keeper that cannot be reached.
//
// ErrConfig is returned at start-up for an invalid configuration; it is
// never returned while a job is worked.
var (
	ErrPayloadMissing  = errors.New("payload missing")
	ErrPayloadCorrupt  = errors.New("payload corrupt")
	ErrTicketInvalid   = errors.New("ticket invalid")
	ErrPayloadTooLarge = errors.New("payload too large")
	ErrKeyConflict     = errors.New("key holds different bytes")
	ErrTicketForbidden = errors.New("ticket forbidden")
	ErrAccessDenied    = errors.New("access denied")
	ErrUnavailable     = errors.New("unavailable")
	ErrKeeper          = errors.New("keeper failed")
	ErrConfig          = errors.New("invalid configuration")
)

// Reasons recorded on dead letters; see Reason.
const (
	ReasonPayloadMissing  = "payload-missing"
	ReasonPayloadCorrupt  = "payload-corrupt"
	ReasonTicketInvalid   = "ticket-invalid"
	ReasonPayloadTooLarge = "payload-too-large"
	ReasonKeyConflict     = "key-conflict"
	ReasonTicketForbidden = "ticket-forbidden"
	ReasonHandler         = "handler-permanent"
	ReasonAccessDenied    = "access-denied"
	ReasonUnavailable     = "store-unavailable"
	ReasonKeeper          = "keeper-failed"
	ReasonConfig          = "config"
	ReasonTransient       = "transient"
)

var reasons = []struct {
	err       error
	reason    string
	permanent bool
}{
	{ErrPayloadMissing, ReasonPayloadMissing, true},
	{ErrPayloadCorrupt, ReasonPayloadCorrupt, true},
	{ErrTicketInvalid, ReasonTicketInvalid, true},
	{ErrPayloadTooLarge, ReasonPayloadTooLarge, true},
	{ErrKeyConflict, ReasonKeyConflict, true},
	{ErrTicketForbidden, ReasonTicketForbidden, true},
	{ErrAccessDenied, ReasonAccessDenied, false},
	{ErrUnavailable, ReasonUnavailable, false},
	{ErrKeeper, ReasonKeeper, false},
	{ErrConfig, ReasonConfig, false},
}

// PermanentError marks an error that retrying cannot fix. Handlers return
// Permanent(err) to dead-letter a job on its current attempt.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that IsPermanent reports true for it. Permanent(nil)
// is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err must not be retried: it wraps one of the
// permanent classes listed with ErrPayloadMissing, or a PermanentError.
// Everything else (nil excepted, which is not an error) is transient.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return true
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.permanent
		}
	}
	return false
}

// Reason returns the machine-readable name of err's class: one of the Reason
// constants. A PermanentError that wraps no class is ReasonHandler; an error
// of no class is ReasonTransient; nil is "".
func Reason(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	var pe *PermanentError
	if errors.As(err, &pe) {
		return ReasonHandler
	}
	return ReasonTransient
}

// storeError classifies an error returned by gocloud.dev/blob into one of the
// classes above. NotFound becomes ErrPayloadMissing only when notFoundMissing
// is set (a claim); access denied is never "missing" (docs/invariants.md, invariant 4).
// The wrapped message never contains the object key: callers pass what
// (the operation and the ticket's redacted identity) instead.
func storeError(what string, err error, notFoundMissing bool) error {
	if err == nil {
		return nil
	}
	var sse *sseError
	if errors.As(err, &sse) {
		// Server-side encryption requested and not applied (store_s3.go):
		// the store's configuration is at fault, not the payload.
		return &classError{class: ErrConfig, msg: what + ": " + sse.Error(), cause: err}
	}
	class := ErrUnavailable
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		if notFoundMissing {
			class = ErrPayloadMissing
		}
	case gcerrors.PermissionDenied:
		class = ErrAccessDenied
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		class = ErrUnavailable
	}
	return &classError{class: class, msg: what, cause: err}
}

// classError carries a class for errors.Is and the driver's error for
// errors.As, while its message omits the driver's text (which usually names
// the full object key or path).
type classError struct {
	class error
	msg   string
	cause error
}

func (e *classError) Error() string {
	code := gcerrors.Code(e.cause)
	return fmt.Sprintf("%s: %v (code %v)", e.msg, e.class, code)
}

func (e *classError) Is(target error) bool { return target == e.class }
func (e *classError) Unwrap() error        { return e.cause }
