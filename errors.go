package claimcheck

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck/internal/ctxio"
)

// The error classes of claimcheck. Every error returned by this module wraps
// at most one of them (ErrNotVisibleYet comes with ErrUnavailable); test with errors.Is. IsPermanent tells which classes
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
//   - ErrNotVisibleYet (with ErrUnavailable): no object yet, within the
//     store's NotFoundGrace after the ticket's creation (an eventually
//     consistent store catching up); after the grace it is ErrPayloadMissing.
//   - ErrKeeper: the keeper cannot wrap or unwrap a data key: the wrong
//     key-encryption key (a different --keeper than the one that encrypted
//     the payload), a disabled key, a key the caller may not use (a KMS's
//     AccessDeniedException), one pending deletion or missing, or a keeper
//     that cannot be reached. The error carries the keeper's own message,
//     which names the key where the KMS does.
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
	// ErrNotVisibleYet: a claim found no object within the store's
	// NotFoundGrace after the ticket's creation, so an eventually
	// consistent store may not show it yet. Transient; it also matches
	// ErrUnavailable (errors.Is), so it is retried as unavailable
	// infrastructure is.
	ErrNotVisibleYet = errors.New("payload not visible yet")
	ErrKeeper        = errors.New("keeper failed")
	ErrConfig        = errors.New("invalid configuration")
)

// The causes of a failure, beside its class: why a store, keeper, database
// or broker call failed, when the error chain tells. An error of this module
// matches at most one of them with errors.Is, and its message says which,
// naming the endpoint (host:port) for network failures, never an object key.
// The standard library's own errors stay in the chain for errors.As and
// errors.Is (syscall.ENOSPC, *net.OpError, *net.DNSError,
// *tls.CertificateVerificationError, x509.UnknownAuthorityError, ...). A
// cause does not change the class: all of them are transient
// (ErrUnavailable, or ErrKeeper for a keeper), since an operator can fix
// each while the job waits.
//
//   - ErrNoSpace: no space left on the device (ENOSPC) or the disk quota
//     is exhausted (EDQUOT): a file:// store, the spool directory.
//   - ErrConnRefused: the endpoint refused the connection (ECONNREFUSED):
//     nothing listens there.
//   - ErrDNS: the endpoint's host name does not resolve (*net.DNSError).
//   - ErrTLS: the TLS handshake failed: an untrusted or mismatched
//     certificate, a TLS alert, or TLS spoken to a plain-text port.
//   - ErrTimeout: a connection could not be made within its connect
//     timeout, or a connection made no progress within its stall timeout
//     (see DefaultConnectTimeout and DefaultStallTimeout).
//
// and, reported by a store's driver (StoreCauseError; stores/s3store):
//
//   - ErrNoBucket: the bucket does not exist (S3's NoSuchBucket, also
//     told apart from a missing object on a HEAD): a wrong bucket name, or
//     a bucket removed. Never ErrPayloadMissing: a job waits for it.
//   - ErrWrongRegion: the bucket is in another region than the one the
//     store URL signs for, or the endpoint is not the bucket's
//     (PermanentRedirect, AuthorizationHeaderMalformed).
//   - ErrArchived: the object is in an archive storage class (S3's
//     InvalidObjectState, ObjectNotInActiveTierError): it exists, and can
//     be read once restored.
//   - ErrNoCredentials: the client found no credentials to sign with
//     (the AWS SDK's credential chain came up empty: no environment
//     variables, shared files or instance role).
//
// At start-up (Store.CheckBucket, the namespace marker's read and write)
// ErrNoBucket, ErrWrongRegion and ErrNoCredentials are ErrConfig: the store
// URL or the environment is wrong.
var (
	ErrNoBucket      = errors.New("bucket does not exist")
	ErrWrongRegion   = errors.New("wrong region or endpoint for the bucket")
	ErrArchived      = errors.New("object archived")
	ErrNoCredentials = errors.New("no credentials")
)

var (
	ErrNoSpace     = errors.New("no space left on device")
	ErrConnRefused = errors.New("connection refused")
	ErrDNS         = errors.New("DNS failure")
	ErrTLS         = errors.New("TLS failure")
	ErrTimeout     = errors.New("timed out")
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
	ReasonNotVisibleYet   = "payload-not-visible-yet"
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
	{ErrNotVisibleYet, ReasonNotVisibleYet, false},
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

// StoreError classifies err, returned by a call to the store's bucket
// (Store.Bucket, gocloud.dev/blob) made outside the Store's own methods,
// such as the sweeper's listings and deletes, as the Store's own calls
// are: ErrAccessDenied for permission denied, ErrConfig for the store's
// configuration at fault, otherwise ErrUnavailable (NotFound included: no
// payload was being claimed), its cause (CauseOf) named. what says what
// failed; the message keeps none of err's own text, which may name a full
// object key or path, and gives the gcerrors code. StoreError(what, nil)
// is nil.
func StoreError(what string, err error) error { return storeError(what, err, false) }

// storeError classifies an error returned by gocloud.dev/blob into one of the
// classes above. NotFound becomes ErrPayloadMissing only when notFoundMissing
// is set (a claim); access denied is never "missing" (docs/invariants.md, invariant 4).
// The wrapped message never contains the object key: callers pass what
// (the operation and the ticket's redacted identity) instead.
func storeError(what string, err error, notFoundMissing bool) error {
	if err == nil {
		return nil
	}
	var ce StoreConfigError
	if errors.As(err, &ce) {
		// The store's configuration is at fault, not the payload (driver.go;
		// e.g. S3 server-side encryption requested and not applied).
		return &classError{class: ErrConfig, msg: what + ": " + ce.StoreConfigError(), cause: err}
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
	var sc StoreCauseError
	if errors.As(err, &sc) {
		// The driver names the cause (no such bucket, wrong region, an
		// archived object): whatever the code, never "missing".
		class = ErrUnavailable
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		class = ErrUnavailable
	}
	return &classError{class: class, msg: what, cause: err}
}

// classError carries a class for errors.Is and the driver's error for
// errors.As, while its message omits the driver's text (which usually names
// the full object key or path): it gives the cause (causeOf) instead. local
// marks the error of a local file (the spool, a file:// store's fsync): its
// message has no gcerrors code, and gives the system's error, without the
// path, when no cause is known.
type classError struct {
	class error
	msg   string
	cause error
	local bool
}

// fileError is a local file's failure (the spool, fsync) as ErrUnavailable,
// its cause named (ErrNoSpace) and its path left out of the message.
func fileError(what string, err error) error {
	return &classError{class: ErrUnavailable, msg: what, cause: err, local: true}
}

func (e *classError) Error() string {
	why, _ := causeOf(e.cause)
	if e.local {
		if why == "" {
			why = pathErrNoName(e.cause).Error()
		}
		return fmt.Sprintf("%s: %v: %s", e.msg, e.class, why)
	}
	code := gcerrors.Code(e.cause)
	if why != "" {
		return fmt.Sprintf("%s: %v: %s (code %v)", e.msg, e.class, why, code)
	}
	return fmt.Sprintf("%s: %v (code %v)", e.msg, e.class, code)
}

func (e *classError) Is(target error) bool {
	if target == e.class {
		return true
	}
	_, c := causeOf(e.cause)
	return c != nil && target == c
}

func (e *classError) Unwrap() error { return e.cause }

// causeError gives err, the failure of a call to a store, keeper, database
// or broker, the class class and, when its chain tells one, a cause (see
// ErrNoSpace), both for errors.Is; what says what failed. Unlike
// classError its message keeps err's own text (which must then name no
// object key): use it for errors of databases and brokers.
func causeError(class error, what string, err error) error {
	return &causedError{class: class, msg: what, err: err}
}

type causedError struct {
	class error
	msg   string
	err   error
}

func (e *causedError) Error() string {
	if why, _ := causeOf(e.err); why != "" {
		return fmt.Sprintf("%s: %v: %s: %v", e.msg, e.class, why, e.err)
	}
	return fmt.Sprintf("%s: %v: %v", e.msg, e.class, e.err)
}

func (e *causedError) Is(target error) bool {
	if target == e.class {
		return true
	}
	_, c := causeOf(e.err)
	return c != nil && target == c
}

func (e *causedError) Unwrap() error { return e.err }

// Unavailable returns err, the failure of a call to a database, broker or
// other service that claimcheck depends on, as an error of class
// ErrUnavailable with its cause named (ErrConnRefused, ErrDNS, ErrTLS,
// ErrTimeout, ErrNoSpace) in its message and for errors.Is; what says what
// failed ("connect to PostgreSQL 127.0.0.1:5432"). err's own text is kept,
// so it must name no object key. If err already wraps ErrUnavailable it
// is returned wrapped in what only. Unavailable(what, nil) is nil.
func Unavailable(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return causeError(ErrUnavailable, what, err)
}

// CauseOf returns a phrase that describes the cause of err, naming the
// endpoint (host:port) of a network failure and never a path or object
// key, and the cause itself (ErrNoSpace, ErrConnRefused, ErrDNS, ErrTLS,
// ErrTimeout, ErrNoBucket, ErrWrongRegion, ErrArchived or
// ErrNoCredentials; nil for a described failure of no such class); "" and
// nil when err's chain tells none.
func CauseOf(err error) (description string, cause error) { return causeOf(err) }

func causeOf(err error) (string, error) {
	if err == nil {
		return "", nil
	}
	ep := endpointOf(err)
	at := func(prep string) string { // " by host:port"
		if ep == "" {
			return ""
		}
		return " " + prep + " " + ep
	}
	var (
		dns   *net.DNSError
		stall *ctxio.StallError
		bound *callTimeout
		sc    StoreCauseError
	)
	if errors.As(err, &sc) {
		if why, c := sc.StoreCause(); c != nil {
			return why, c
		}
	}
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "no space left on device", ErrNoSpace
	case errors.Is(err, syscall.EDQUOT):
		return "no space left on device (disk quota exceeded)", ErrNoSpace
	case errors.As(err, &dns):
		why := dns.Err
		if dns.IsNotFound {
			why = "no such host"
		}
		return fmt.Sprintf("DNS failure: cannot resolve %s: %s", dns.Name, why), ErrDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused" + at("by"), ErrConnRefused
	case errors.As(err, &bound):
		return fmt.Sprintf("timed out: %s did not answer within %v", bound.what, bound.after), ErrTimeout
	case errors.As(err, &stall):
		return fmt.Sprintf("timed out: no progress on the connection to %s for %v (stalled %s)", stall.Addr, stall.After, stall.Op), ErrTimeout
	}
	if why := tlsFailure(err); why != "" {
		return "TLS failure" + at("with") + ": " + why, ErrTLS
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !errors.Is(err, context.DeadlineExceeded) {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return "timed out connecting" + at("to"), ErrTimeout
		}
		return "timed out" + at("waiting for"), ErrTimeout
	}
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset" + at("by"), nil
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to host" + at("to"), nil
	case errors.Is(err, syscall.EROFS):
		return "read-only file system", nil
	case (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && ep != "":
		return "connection closed" + at("by") + " before it answered", nil
	}
	// Any other failure of an HTTP request: the transport's own words (its
	// *url.Error's, whose URL, which names the object key, is left out).
	var ue *url.Error
	if errors.As(err, &ue) && ep != "" && ue.Err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return "request to " + ep + " failed: " + ue.Err.Error(), nil
	}
	return "", nil
}

// callTimeout is a call cut by claimcheck's own bound on it (a keeper
// call: DefaultKeeperTimeout), not by its caller's context.
type callTimeout struct {
	what  string // "the keeper"
	after time.Duration
	err   error
}

func (e *callTimeout) Error() string {
	return fmt.Sprintf("%s did not answer within %v: %v", e.what, e.after, e.err)
}
func (e *callTimeout) Unwrap() error { return e.err }
func (e *callTimeout) Timeout() bool { return true }

// tlsFailure describes a failed TLS handshake in err's chain, or is "".
func tlsFailure(err error) string {
	var (
		verify   *tls.CertificateVerificationError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, http.ErrSchemeMismatch):
		return "the server answered in plain HTTP (use an http:// endpoint)"
	case errors.As(err, &verify):
		return verify.Err.Error()
	case errors.As(err, &unknown):
		return unknown.Error()
	case errors.As(err, &hostname):
		return hostname.Error()
	case errors.As(err, &invalid):
		return invalid.Error()
	case errors.As(err, &record):
		return record.Msg
	case errors.As(err, &alert):
		return alert.Error()
	}
	return ""
}

// endpointOf finds the remote endpoint (host:port) of a network failure in
// err's chain: the address of a *net.OpError, or the host of a *url.Error
// (whose URL, which names the object key, is not kept).
func endpointOf(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		return op.Addr.String()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			return u.Host
		}
	}
	return ""
}
