package claimcheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	jsonv1 "github.com/go-json-experiment/json/v1"
)

// TicketVersion is the major version of the ticket wire format written by
// this package. A reader refuses any other major version; minor, backward
// compatible additions are new optional fields, which older readers ignore.
// docs/ticket.md is the normative description.
const TicketVersion = 1

// MaxTicketBytes is the largest encoded size, in bytes, of a ticket for an
// offloaded payload, whatever the payload's size. Input limits (tenant, name,
// version and content type lengths) are chosen so that every offloaded ticket
// fits; a test builds the worst case.
const MaxTicketBytes = 512

// MaxKeyIDLen is the longest key id, in bytes, an inline sealed ticket
// carries in its "kid" field; a longer one (a KMS key named at length) is
// left out of the ticket. It fits in what MaxTicketBytes allows for an
// offloaded ticket's store and key, which an inline ticket has not, so
// InlineTicketSize bounds an inline ticket with a key id too.
const MaxKeyIDLen = 128

// MaxEncodedTicketBytes bounds what ParseTicket reads: the inline ticket of
// a 4 MiB threshold, far above any sensible configuration.
const MaxEncodedTicketBytes = 6 << 20

// Ticket is the claim check: what a queue carries instead of the payload.
// It holds what routing and verification need and nothing else. A ticket
// either names an object (Key set) or carries the payload inline (Key empty;
// Inline holds Size bytes, nil when Size is 0).
//
// Encoded as JSON (see docs/ticket.md):
//
//	{"v":1,"tenant":"acme","store":"default","key":"payloads/acme/3f/3f…",
//	 "sha256":"3f…","size":4707275,"type":"application/pdf",
//	 "created":"2026-11-29T21:34:24.123Z"}
type Ticket struct {
	// Version is the wire format's major version (TicketVersion).
	Version int `json:"v"`
	// Tenant owns the payload; keys live under the tenant's prefix.
	Tenant string `json:"tenant"`
	// Store is the logical name of the object store holding the payload
	// (never a URL or a credential). Empty for inline tickets.
	Store string `json:"store,omitempty"`
	// Key is the object key within Store. Empty for inline tickets.
	Key string `json:"key,omitempty"`
	// SHA256 is the lowercase hex SHA-256 of the payload's bytes.
	SHA256 string `json:"sha256"`
	// Size is the payload's length in bytes.
	Size int64 `json:"size"`
	// ContentType is the payload's media type (RFC 6838), optional.
	ContentType string `json:"type,omitempty"`
	// Created is when the payload was checked in (UTC).
	Created time.Time `json:"created"`
	// Inline holds a small payload's bytes (base64 in JSON): the plaintext,
	// or its ciphertext when DEK is set.
	Inline []byte `json:"inline,omitempty"`
	// DEK is the wrapped data key of an encrypted inline payload (base64).
	// An offloaded payload's wrapped key is in its object's metadata.
	DEK string `json:"dek,omitempty"`
	// KID is the id of the key-encryption key that wrapped DEK
	// (KeeperID, KeyIDText's form; at most MaxKeyIDLen bytes), so that a
	// worker holding another key says which one the ticket needs instead
	// of failing to unwrap. Set only beside DEK, and optional there:
	// tickets sealed before it was written, or under a keeper given no id
	// or one longer than MaxKeyIDLen, have none. An offloaded payload's key
	// id is in its object's metadata (docs/ticket.md says why not here).
	KID string `json:"kid,omitempty"`
	// Manifest marks a ticket whose object is a manifest (manifest.go):
	// Key, SHA256 and Size are the manifest object's, and the job's
	// documents are the ones it lists. Never inline; Size at most
	// MaxManifestBytes.
	Manifest bool `json:"manifest,omitempty"`
	// Sig authenticates the ticket: base64url HMAC-SHA256, under a key
	// derived from the deployment secret, of the ticket encoded without Sig.
	Sig string `json:"sig,omitempty"`
}

// IsInline reports whether the ticket carries its payload itself.
func (t *Ticket) IsInline() bool { return t.Key == "" }

// Marshal encodes the ticket. It returns ErrTicketInvalid if the ticket does
// not validate, or if an offloaded ticket would exceed MaxTicketBytes.
func (t *Ticket) Marshal() ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: encode ticket: %w", err)
	}
	if !t.IsInline() && len(b) > MaxTicketBytes {
		return nil, fmt.Errorf("claimcheck: ticket of %d bytes exceeds %d: %w", len(b), MaxTicketBytes, ErrTicketInvalid)
	}
	return b, nil
}

// ParseTicket decodes and validates a ticket. A malformed or truncated
// document, trailing data, a missing or unknown major version, or a field
// that fails validation returns an error wrapping ErrTicketInvalid. Unknown
// fields are ignored (they are minor-version additions).
func ParseTicket(b []byte) (*Ticket, error) {
	if len(b) > MaxEncodedTicketBytes {
		return nil, fmt.Errorf("claimcheck: parse ticket: %d bytes, more than any ticket (%d): %w", len(b), MaxEncodedTicketBytes, ErrTicketInvalid)
	}
	// One pass for a well-formed ticket: a decode into DecodedTicket, with
	// encoding/json's semantics on the json v2 prototype's decoder
	// (go-json-experiment/json/v1, what encoding/json becomes under
	// GOEXPERIMENT=jsonv2), which reads the ticket once where
	// encoding/json reads it twice (validation, then decoding): ParseTicket
	// was a tenth of a small job's CPU worked on PostgreSQL, and took
	// 63–88 µs against 19–48 µs for a 4 KiB inline ticket. Anything that
	// does not decode goes through the checks below, one by one, for their
	// errors.
	var d DecodedTicket
	if err := jsonv1.Unmarshal(b, &d); err == nil {
		return d.Check()
	}
	var probe struct {
		Version *int `json:"v"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("claimcheck: parse ticket: malformed JSON (%v): %w", describeJSONError(err), ErrTicketInvalid)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("claimcheck: parse ticket: trailing data after the ticket: %w", ErrTicketInvalid)
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("claimcheck: parse ticket: not a ticket object (%v): %w", describeJSONError(err), ErrTicketInvalid)
	}
	if err := checkVersion(probe.Version); err != nil {
		return nil, err
	}
	// Into Ticket, not DecodedTicket: a type error then names the field
	// as the ticket spells it ("size", not "Ticket.size").
	var t Ticket
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("claimcheck: parse ticket: %v: %w", describeJSONError(err), ErrTicketInvalid)
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// DecodedTicket is a ticket decoded by encoding/json as a field of a larger
// document (a job's arguments), in the document's own pass: Check then
// validates it as ParseTicket does. V is the "v" field, nil when the
// document has none (the shallower field wins over Ticket.Version, which
// stays 0 until Check).
type DecodedTicket struct {
	V *int `json:"v"`
	Ticket
}

// Check validates d as ParseTicket validates a ticket it decoded: a missing
// or unknown major version, or a field that fails validation, returns an
// error wrapping ErrTicketInvalid. It returns a copy of d's ticket with
// Version set. ParseTicket's bound on its input (MaxEncodedTicketBytes)
// is not Check's: it bounds what ParseTicket reads, and the document
// holding d was read already.
func (d *DecodedTicket) Check() (*Ticket, error) {
	if err := checkVersion(d.V); err != nil {
		return nil, err
	}
	t := d.Ticket
	t.Version = TicketVersion
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// checkVersion checks a ticket's "v" field (nil: absent).
func checkVersion(v *int) error {
	switch {
	case v == nil:
		return fmt.Errorf("claimcheck: parse ticket: no version field \"v\": %w", ErrTicketInvalid)
	case *v != TicketVersion:
		return fmt.Errorf("claimcheck: parse ticket: unsupported major version %d (this build reads %d): %w", *v, TicketVersion, ErrTicketInvalid)
	}
	return nil
}

// describeJSONError keeps a JSON error's position and type but never the
// offending bytes (a ticket may inline payload bytes).
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	default:
		return "undecodable"
	}
}

func (t *Ticket) validate() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("claimcheck: ticket: "+format+": %w", append(args, ErrTicketInvalid)...)
	}
	if t.Version != TicketVersion {
		return invalid("unsupported major version %d", t.Version)
	}
	if err := ValidateTenant(t.Tenant); err != nil {
		return invalid("%v", err)
	}
	if !IsHexDigest(t.SHA256) {
		return invalid("sha256 is not 64 lowercase hex characters")
	}
	if t.Size < 0 {
		return invalid("negative size")
	}
	if t.Created.IsZero() {
		return invalid("no creation time")
	}
	if err := validateContentType(t.ContentType); err != nil {
		return invalid("%v", err)
	}
	if t.IsInline() {
		if t.Store != "" {
			return invalid("inline ticket names a store")
		}
		if t.Manifest {
			return invalid("a manifest ticket must name its object")
		}
		if t.DEK == "" && int64(len(t.Inline)) != t.Size {
			return invalid("inline payload is %d bytes, size says %d", len(t.Inline), t.Size)
		}
		if t.DEK != "" && int64(len(t.Inline)) <= t.Size {
			return invalid("encrypted inline payload is shorter than its plaintext")
		}
		if t.KID != "" && t.DEK == "" {
			return invalid("key id without a wrapped data key")
		}
		if len(t.KID) > MaxKeyIDLen {
			return invalid("key id of %d bytes, more than %d", len(t.KID), MaxKeyIDLen)
		}
		return nil
	}
	if len(t.Inline) != 0 || t.DEK != "" || t.KID != "" {
		return invalid("ticket has both a key and inline bytes")
	}
	if t.Manifest && t.Size > MaxManifestBytes {
		return invalid("manifest of %d bytes, more than %d", t.Size, MaxManifestBytes)
	}
	if err := validateStoreName(t.Store); err != nil {
		return invalid("%v", err)
	}
	if err := validateKey(t.Key, t.Tenant); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// DigestPrefix is the part of the digest that logs and error strings show:
// enough to find the object, too little to confirm a guess of its content.
func (t *Ticket) DigestPrefix() string {
	if len(t.SHA256) < 12 {
		return t.SHA256
	}
	return t.SHA256[:12]
}

// RedactedKey is the key cut after its tenant's prefix ("payloads/acme/…"),
// the most of a key that output shows unless the operator asks for more.
func (t *Ticket) RedactedKey() string {
	if t.IsInline() {
		return ""
	}
	for _, p := range []string{PrefixPayloads, PrefixResults} {
		if strings.HasPrefix(t.Key, p+t.Tenant+"/") {
			return p + t.Tenant + "/…"
		}
	}
	return "…"
}

// String is the redacted form used in error strings: tenant, digest prefix
// and size. It never contains the key or payload bytes.
func (t *Ticket) String() string {
	return fmt.Sprintf("tenant=%s sha256=%s… size=%d", t.Tenant, t.DigestPrefix(), t.Size)
}

// LogValue implements slog.LogValuer: a ticket logs as tenant, digest prefix,
// size and whether it is inline, never its key or bytes.
func (t *Ticket) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("tenant", t.Tenant),
		slog.String("sha256", t.DigestPrefix()),
		slog.Int64("size", t.Size),
		slog.Bool("inline", t.IsInline()),
	)
}

// IsHexDigest reports whether s is a SHA-256 digest as tickets write it:
// 64 lowercase hex characters.
func IsHexDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
