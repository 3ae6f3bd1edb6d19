package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// The API's own reasons, beside claimcheck's (claimcheck.Reason).
const (
	ReasonUnauthorized        = "unauthorized"
	ReasonBadRequest          = "bad-request"
	ReasonJobNotFound         = "job-not-found"
	ReasonLeaseNotFound       = "lease-not-found"
	ReasonNoResult            = "no-result"
	ReasonIdempotencyConflict = "idempotency-conflict"
	ReasonDigestMismatch      = "digest-mismatch"
	ReasonTooManyRequests     = "too-many-requests"
	// ReasonPayloadEmpty: a submit's body is empty and allow_empty=true
	// was not given (pipeline.ErrEmptyPayload); 422.
	ReasonPayloadEmpty = "payload-empty"
	// ReasonJobFinished: a cancel of a job that already finished
	// (pipeline.ErrJobFinished); 409.
	ReasonJobFinished = "job-finished"
	// ReasonNotDead: a replay of a job that is not a dead letter
	// (pipeline.ErrNotDead); 409.
	ReasonNotDead = "not-dead"
	// ReasonMethodNotAllowed: the path is a route, not for this method;
	// 405 with Allow.
	ReasonMethodNotAllowed = "method-not-allowed"
	// ReasonHeadersTooLarge: the request's headers exceed MaxHeaderBytes;
	// 431.
	ReasonHeadersTooLarge = "headers-too-large"
	// ReasonStoreNotConfigured: a submit's store parameter names no
	// store of this server (pipeline.ErrStoreNotConfigured: serve's
	// --store NAME=URL); 422, nothing stored.
	ReasonStoreNotConfigured = "store-not-configured"
)

// Error is the JSON body of every refusal and failure.
type Error struct {
	// Reason is the machine-readable class: claimcheck.Reason's names, or
	// one of the Reason constants above.
	Reason string `json:"reason"`
	// Message is for people; it holds neither payload bytes nor a full
	// object key (the core's errors never do).
	Message string `json:"message"`
	// Permanent: the same request fails again (false: retry later).
	Permanent bool `json:"permanent"`

	status int
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func refusal(status int, reason, msg string) *Error {
	return &Error{Reason: reason, Message: msg, Permanent: status < 500 && status != http.StatusTooManyRequests, status: status}
}

func badRequest(msg string) *Error { return refusal(http.StatusBadRequest, ReasonBadRequest, msg) }

// apiRefusals are the core's errors the API answers with a reason and
// status of its own, in the order classify tries them (the first match
// wins): each is permanent but ErrNoResult (a result may still come).
var apiRefusals = []struct {
	err       error
	reason    string
	status    int
	permanent bool
}{
	{pipeline.ErrEmptyPayload, ReasonPayloadEmpty, http.StatusUnprocessableEntity, true},
	{errDigestMismatch, ReasonDigestMismatch, http.StatusUnprocessableEntity, true},
	{pipeline.ErrIdempotencyConflict, ReasonIdempotencyConflict, http.StatusConflict, true},
	{pipeline.ErrJobFinished, ReasonJobFinished, http.StatusConflict, true},
	{pipeline.ErrNotDead, ReasonNotDead, http.StatusConflict, true},
	// A replay refused as `claimcheck dead replay` refuses it.
	{pipeline.ErrPayloadGone, claimcheck.ReasonPayloadMissing, http.StatusConflict, true},
	{pipeline.ErrStoreNotConfigured, ReasonStoreNotConfigured, http.StatusUnprocessableEntity, true},
	{pipeline.ErrJobNotFound, ReasonJobNotFound, http.StatusNotFound, true},
	{pipeline.ErrNoResult, ReasonNoResult, http.StatusConflict, false},
}

// reasonStatus is the HTTP status of each of claimcheck's reasons
// (claimcheck.Reason); a reason not listed (unavailable, access denied,
// keeper, not visible yet, transient) is 503.
var reasonStatus = map[string]int{
	claimcheck.ReasonPayloadMissing:  http.StatusGone,
	claimcheck.ReasonPayloadCorrupt:  http.StatusUnprocessableEntity,
	claimcheck.ReasonTicketInvalid:   http.StatusBadRequest,
	claimcheck.ReasonPayloadTooLarge: http.StatusRequestEntityTooLarge,
	claimcheck.ReasonKeyConflict:     http.StatusConflict,
	claimcheck.ReasonTicketForbidden: http.StatusForbidden,
	claimcheck.ReasonConfig:          http.StatusInternalServerError,
	claimcheck.ReasonHandler:         http.StatusInternalServerError,
}

// classify maps an error of the core to its HTTP status and body: the
// API's own refusals first (apiRefusals, a body over the size limit), then
// the status follows the class (claimcheck.Reason, reasonStatus), permanent
// follows claimcheck.IsPermanent.
func classify(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	e := &Error{Reason: claimcheck.Reason(err), Message: err.Error(), Permanent: claimcheck.IsPermanent(err)}
	for _, r := range apiRefusals {
		if errors.Is(err, r.err) {
			e.Reason, e.Permanent, e.status = r.reason, r.permanent, r.status
			return e
		}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		e.Reason, e.Permanent, e.status = claimcheck.ReasonPayloadTooLarge, true, http.StatusRequestEntityTooLarge
		return e
	}
	e.status = http.StatusServiceUnavailable
	if status, ok := reasonStatus[e.Reason]; ok {
		e.status = status
	}
	return e
}

// writeError answers with e's status and JSON body.
func writeError(w http.ResponseWriter, e *Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Digest")
	h.Del("Content-Length")
	if e.status == http.StatusServiceUnavailable || e.status == http.StatusTooManyRequests {
		h.Set("Retry-After", "5")
	}
	if e.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="claimcheck"`)
	}
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
