package claimcheck

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Attachments: several documents, one job. A job whose work needs several
// documents (a consignment's label, commercial invoice and customs
// declaration) carries one ticket, whose object is a small manifest
// listing each document by name with its own ticket. The manifest is
// checked in like any payload (streamed, hashed, sealed), so verification
// chains from the job's ticket: the ticket's SHA-256 verifies the
// manifest, and each entry's SHA-256 verifies its document. The job's
// ticket stays within MaxTicketBytes however many attachments there are.
// docs/ticket.md, "Manifests", is the normative description.

// ManifestVersion is the major version of the manifest format written by
// this package; a reader refuses any other (docs/ticket.md, "Manifests").
const ManifestVersion = 1

// Manifest limits. MaxManifestBytes bounds what ParseManifest and a claim
// read: MaxAttachments entries of at most MaxTicketBytes plus a name each
// fit well within it.
const (
	// MaxAttachments is the most attachments one job carries.
	MaxAttachments = 32
	// MaxAttachmentNameLen is the longest attachment name, in bytes.
	MaxAttachmentNameLen = 64
	// MaxManifestBytes is the largest encoded manifest, in bytes (64 KiB).
	MaxManifestBytes = 64 << 10
)

// ManifestContentType is the media type of a manifest object and of its
// ticket (RFC 8259 JSON).
const ManifestContentType = "application/json"

// Attachment is one entry of a manifest: a document's name and the ticket
// of its object (always offloaded, never inline).
type Attachment struct {
	// Name is how the handler asks for the document (Job.Attachments) and
	// the file name an --exec command finds it under
	// (ValidateAttachmentName).
	Name string `json:"name"`
	// Ticket is the document's ticket: key, size, SHA-256, type.
	Ticket *Ticket `json:"ticket"`
}

// Manifest lists the documents of one job. Encoded as JSON
// (docs/ticket.md, "Manifests"):
//
//	{"v":1,"payload":{…ticket…},
//	 "attachments":[{"name":"label.pdf","ticket":{…}},…]}
type Manifest struct {
	// Version is the manifest format's major version (ManifestVersion).
	Version int `json:"v"`
	// Payload is the ticket of the job's main payload (standard input of
	// an --exec command), nil when the job has only attachments.
	Payload *Ticket `json:"payload,omitempty"`
	// Attachments are the named documents, 1 to MaxAttachments, names
	// unique, in the order they were given.
	Attachments []Attachment `json:"attachments"`
}

// ValidateAttachmentName checks an attachment name: 1 to
// MaxAttachmentNameLen bytes of A-Z, a-z, 0-9, '.', '_', '-' and '+',
// not starting with '.' and containing no "..", so that it is a plain
// file name on every system (no path separators, no traversal, no hidden
// file). It returns a plain error describing the problem.
func ValidateAttachmentName(name string) error {
	switch {
	case name == "":
		return errors.New("attachment name is empty")
	case len(name) > MaxAttachmentNameLen:
		return fmt.Errorf("attachment name is %d bytes, at most %d allowed", len(name), MaxAttachmentNameLen)
	case strings.ContainsAny(name, `/\`):
		return fmt.Errorf("attachment name %q has a path separator: it must be a plain file name", name)
	case strings.Contains(name, ".."):
		return fmt.Errorf("attachment name %q contains \"..\"", name)
	case name[0] == '.':
		return fmt.Errorf("attachment name %q starts with '.'", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '.' && c != '_' && c != '-' && c != '+' {
			return fmt.Errorf("attachment name %q has character %q at byte %d: use A-Z, a-z, 0-9, '.', '_', '-', '+'", truncateText(name), c, i)
		}
	}
	return nil
}

// ValidateAttachmentNames checks each name (ValidateAttachmentName), that
// there are 1 to MaxAttachments of them and that none repeats.
func ValidateAttachmentNames(names []string) error {
	if len(names) == 0 {
		return errors.New("no attachments")
	}
	if len(names) > MaxAttachments {
		return fmt.Errorf("%d attachments, at most %d allowed", len(names), MaxAttachments)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if err := ValidateAttachmentName(n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("attachment name %q given twice", n)
		}
		seen[n] = true
	}
	return nil
}

// truncateText keeps error strings bounded for names not yet validated.
func truncateText(s string) string {
	if len(s) > MaxAttachmentNameLen {
		return s[:MaxAttachmentNameLen] + "…"
	}
	return s
}

// Names are the attachments' names, in order.
func (m *Manifest) Names() []string {
	names := make([]string, len(m.Attachments))
	for i, a := range m.Attachments {
		names[i] = a.Name
	}
	return names
}

// Tickets are the tickets the manifest lists: the main payload's (if any)
// first, then each attachment's.
func (m *Manifest) Tickets() []*Ticket {
	var ts []*Ticket
	if m.Payload != nil {
		ts = append(ts, m.Payload)
	}
	for _, a := range m.Attachments {
		ts = append(ts, a.Ticket)
	}
	return ts
}

// validate checks m for tenant: version, names, and every entry's ticket
// (valid, offloaded, not itself a manifest, of tenant, under payloads/).
func (m *Manifest) validate(tenant string) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("claimcheck: manifest: "+format+": %w", append(args, ErrTicketInvalid)...)
	}
	if m.Version != ManifestVersion {
		return invalid("unsupported major version %d (this build reads %d)", m.Version, ManifestVersion)
	}
	if err := ValidateAttachmentNames(m.Names()); err != nil {
		return invalid("%v", err)
	}
	check := func(what string, t *Ticket) error {
		if t == nil {
			return invalid("%s has no ticket", what)
		}
		if err := t.validate(); err != nil {
			return invalid("%s: %v", what, err)
		}
		switch {
		case t.IsInline():
			return invalid("%s is inline: manifest entries name objects", what)
		case t.Manifest:
			return invalid("%s is itself a manifest", what)
		case t.Tenant != tenant:
			return invalid("%s is of another tenant than its job", what)
		case !strings.HasPrefix(t.Key, PrefixPayloads):
			return invalid("%s is not under %s", what, PrefixPayloads)
		}
		return nil
	}
	if m.Payload != nil {
		if err := check("the main payload", m.Payload); err != nil {
			return err
		}
	}
	for _, a := range m.Attachments {
		if err := check(fmt.Sprintf("attachment %q", a.Name), a.Ticket); err != nil {
			return err
		}
	}
	return nil
}

// ParseManifest decodes and validates a manifest of tenant's job. A
// document of more than MaxManifestBytes, malformed or truncated JSON,
// trailing data, a missing or unknown major version, a bad, repeated or
// missing attachment name, more than MaxAttachments entries, or an entry
// whose ticket is invalid, inline, another manifest, of another tenant or
// not under payloads/ returns an error wrapping ErrTicketInvalid
// (permanent: the manifest is part of the job's ticket). Unknown fields
// are ignored. Messages name fields and attachment names, never keys.
func ParseManifest(b []byte, tenant string) (*Manifest, error) {
	if len(b) > MaxManifestBytes {
		return nil, fmt.Errorf("claimcheck: parse manifest: %d bytes, more than %d: %w", len(b), MaxManifestBytes, ErrTicketInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("claimcheck: parse manifest: malformed JSON (%v): %w", describeJSONError(err), ErrTicketInvalid)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("claimcheck: parse manifest: trailing data after the manifest: %w", ErrTicketInvalid)
	}
	var probe struct {
		Version *int `json:"v"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("claimcheck: parse manifest: not a manifest object (%v): %w", describeJSONError(err), ErrTicketInvalid)
	}
	if probe.Version == nil {
		return nil, fmt.Errorf("claimcheck: parse manifest: no version field \"v\": %w", ErrTicketInvalid)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("claimcheck: parse manifest: %v: %w", describeJSONError(err), ErrTicketInvalid)
	}
	if err := m.validate(tenant); err != nil {
		return nil, err
	}
	return &m, nil
}

// Marshal encodes m after validating it for tenant (errors as
// ParseManifest's, and one wrapping ErrTicketInvalid past
// MaxManifestBytes).
func (m *Manifest) Marshal(tenant string) ([]byte, error) {
	if err := m.validate(tenant); err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: encode manifest: %w", err)
	}
	if len(b) > MaxManifestBytes {
		return nil, fmt.Errorf("claimcheck: manifest of %d bytes exceeds %d: %w", len(b), MaxManifestBytes, ErrTicketInvalid)
	}
	return b, nil
}

// CheckInManifest checks m in for tenant as a payload is checked in
// (CheckIn: streamed, hashed, sealed, durable before it returns), always
// as an object, and returns the job's ticket: a ticket with Manifest set
// whose key, size and SHA-256 are the manifest object's. Check every
// document m lists in first (CheckIn with CheckInOptions.Offload); the
// ticket is then at most MaxTicketBytes however many there are.
// opts.ContentType, Name and Version are ignored: a manifest is stored
// under its content address with ManifestContentType; BeforeStore and
// Progress apply.
//
// Errors: those of ParseManifest for an invalid m; those of CheckIn.
func (s *Store) CheckInManifest(ctx context.Context, tenant string, m *Manifest, opts *CheckInOptions) (*Ticket, error) {
	b, err := m.Marshal(tenant)
	if err != nil {
		return nil, err
	}
	o := CheckInOptions{ContentType: ManifestContentType, Offload: true}
	if opts != nil {
		o.BeforeStore, o.Progress = opts.BeforeStore, opts.Progress
	}
	return s.checkIn(ctx, tenant, bytes.NewReader(b), &o, true)
}

// ReadManifest claims the manifest behind a ticket with Manifest set (Claim:
// its tenant, store and signature are checked first), fetches it, verifies
// its size and SHA-256 against the ticket, and parses it (ParseManifest).
// Nothing a manifest lists is fetched.
//
// Errors: ErrTicketInvalid for a ticket that is not a manifest's, a
// manifest larger than MaxManifestBytes, or one that does not parse;
// ErrPayloadMissing, ErrPayloadCorrupt, ErrAccessDenied, ErrUnavailable
// and the keeper's errors as Payload.Verify reports them, wrapped with
// "manifest".
func (s *Store) ReadManifest(ctx context.Context, t *Ticket) (*Manifest, error) {
	if t == nil || !t.Manifest {
		return nil, fmt.Errorf("claimcheck: read manifest: the ticket is not a manifest's: %w", ErrTicketInvalid)
	}
	p, err := s.Claim(t)
	if err != nil {
		return nil, err
	}
	r, err := p.OpenStream(ctx)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: manifest: %w", err)
	}
	defer r.Close()
	// The ticket's size is at most MaxManifestBytes (Ticket.validate), and
	// the verifying reader fails past it: the read is bounded.
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: manifest: %w", err)
	}
	return ParseManifest(b, t.Tenant)
}

// emptySHA256 is the SHA-256 of no bytes.
var emptySHA256 = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// claimManifest claims what a manifest ticket's job needs: its main
// payload (an empty one when the manifest has none) and each attachment,
// verified unless lazy. Errors name the attachment (never its key) and
// keep their class: a missing attachment is ErrPayloadMissing.
func (s *Store) claimManifest(ctx context.Context, t *Ticket, lazy bool) (main *Payload, atts map[string]*Payload, err error) {
	m, err := s.ReadManifest(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	atts = make(map[string]*Payload, len(m.Attachments))
	defer func() {
		if err != nil { // release what was claimed (verified copies)
			closeAll(main, atts)
			main, atts = nil, nil
		}
	}()
	if m.Payload != nil {
		if main, err = s.Claim(m.Payload); err != nil {
			return main, atts, fmt.Errorf("claimcheck: main payload of manifest %s: %w", t, err)
		}
	} else {
		main = &Payload{store: s, ticket: &Ticket{Version: TicketVersion, Tenant: t.Tenant, SHA256: emptySHA256, Created: t.Created}}
	}
	for _, a := range m.Attachments {
		p, cerr := s.Claim(a.Ticket)
		if cerr != nil {
			return main, atts, fmt.Errorf("claimcheck: attachment %q: %w", a.Name, cerr)
		}
		atts[a.Name] = p
	}
	if lazy {
		return main, atts, nil
	}
	if verr := main.Verify(ctx); verr != nil {
		return main, atts, fmt.Errorf("claimcheck: main payload of manifest %s: %w", t, verr)
	}
	for _, a := range m.Attachments {
		if verr := atts[a.Name].Verify(ctx); verr != nil {
			return main, atts, fmt.Errorf("claimcheck: attachment %q: %w", a.Name, verr)
		}
	}
	return main, atts, nil
}

func closeAll(main *Payload, atts map[string]*Payload) {
	if main != nil {
		main.Close()
	}
	for _, p := range atts {
		p.Close()
	}
}
