package claimcheck_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/claimcheck/claimcheck"
)

// The JSON Schema of the ticket (docs/ticket.schema.json) against what this
// package writes and reads. The fixtures under testdata/tickets are shared
// with the Python and JavaScript clients' tests (clients/*/), whose own
// small validators must give the same verdicts.

var updateTicketFixtures = flag.Bool("update-ticket-fixtures", false,
	"rewrite testdata/tickets/valid/ from the tickets this build makes")

const ticketFixtures = "testdata/tickets"

// ticketSchema compiles docs/ticket.schema.json (JSON Schema 2020-12).
func ticketSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	sch, err := c.Compile(filepath.Join("docs", "ticket.schema.json"))
	if err != nil {
		t.Fatalf("compile docs/ticket.schema.json: %v", err)
	}
	return sch
}

// schemaErr validates one encoded ticket against the schema: nil when valid.
func schemaErr(sch *jsonschema.Schema, b []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// realTickets makes one ticket of each form this package writes, through
// the code that writes them (Store.CheckIn, Ticket.Marshal), keyed by the
// fixture name it is kept under.
func realTickets(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	add := func(name string, tk *claimcheck.Ticket) {
		t.Helper()
		out[name] = mustMarshal(t, tk)
	}
	pixel, bash := corpusPDF(t, "pixel.pdf"), corpusPDF(t, "bash.pdf")
	pdf := &claimcheck.CheckInOptions{ContentType: "application/pdf"}

	// The shipped corpus under the defaults: pixel.pdf inline, the rest offloaded.
	plain := setup(t, nil)
	for _, name := range []string{"pixel.pdf", "TeXShopAndAsymptote.pdf", "refcard-a4.pdf", "bash.pdf", "octave.pdf"} {
		add("corpus-"+strings.TrimSuffix(name, ".pdf"), plain.checkIn(t, "local", corpusPDF(t, name), pdf))
	}
	add("inline-empty", plain.checkIn(t, "acme", nil, nil))
	add("named-version", plain.checkIn(t, "acme", []byte("label"), &claimcheck.CheckInOptions{
		Name: "labels/2026/PO-17.v1", Version: "reissue-2", ContentType: "text/plain; charset=utf-8"}))
	add("result", plain.checkIn(t, "acme", bash, &claimcheck.CheckInOptions{Result: true, ContentType: "application/pdf"}))

	label := plain.checkIn(t, "acme", bash, pdf)
	manifest, err := plain.store.CheckInManifest(t.Context(), "acme", &claimcheck.Manifest{
		Version: claimcheck.ManifestVersion, Attachments: []claimcheck.Attachment{{Name: "label.pdf", Ticket: label}}}, nil)
	if err != nil {
		t.Fatalf("CheckInManifest: %v", err)
	}
	add("manifest", manifest)

	kek, kid := newKeeperWithID(t)
	sealed := setup(t, &claimcheck.Options{Keeper: kek, KeeperID: kid})
	add("inline-encrypted", sealed.checkIn(t, "acme", pixel, pdf))
	add("offloaded-encrypted", sealed.checkIn(t, "acme", bash, pdf))
	add("inline-empty-encrypted", sealed.checkIn(t, "acme", nil, nil))

	signed := setup(t, &claimcheck.Options{Name: "eu-west", Secret: secretA, SignTickets: true})
	add("offloaded-signed", signed.checkIn(t, "globex", bash, pdf))
	add("inline-signed", signed.checkIn(t, "globex", pixel, pdf))

	// The largest offloaded ticket the input limits allow (TestTicketWorstCaseFitsBudget's).
	tenant := strings.Repeat("t", claimcheck.MaxTenantLen)
	add("offloaded-worst-case", &claimcheck.Ticket{
		Version:     claimcheck.TicketVersion,
		Tenant:      tenant,
		Store:       strings.Repeat("s", claimcheck.MaxStoreNameLen),
		Key:         claimcheck.PrefixPayloads + tenant + "/named/" + strings.Repeat("n", claimcheck.MaxNameLen) + "@" + strings.Repeat("v", claimcheck.MaxVersionLen),
		SHA256:      strings.Repeat("f", 64),
		Size:        1<<63 - 1,
		ContentType: "application/" + strings.Repeat("x", claimcheck.MaxContentTypeLen-len("application/")),
		Created:     time.Date(9999, 12, 31, 23, 59, 59, 123456789, time.FixedZone("", -(23*3600+59*60))),
		Sig:         strings.Repeat("A", 43),
	})
	return out
}

// TestTicketSchemaAcceptsRealTickets: every form of ticket the code writes
// is valid under the schema; with -update-ticket-fixtures they become the
// fixtures the clients' tests read.
func TestTicketSchemaAcceptsRealTickets(t *testing.T) {
	t.Parallel()
	sch := ticketSchema(t)
	real := realTickets(t)
	for name, b := range real {
		if err := schemaErr(sch, b); err != nil {
			t.Errorf("%s: the schema refuses a ticket the code wrote: %v\n%s", name, err, b)
		}
		if _, err := claimcheck.ParseTicket(b); err != nil {
			t.Errorf("%s: ParseTicket: %v", name, err)
		}
	}
	if b := real["offloaded-worst-case"]; len(b) > claimcheck.MaxTicketBytes {
		t.Errorf("worst case is %d bytes", len(b))
	}
	if !*updateTicketFixtures {
		return
	}
	dir := filepath.Join(ticketFixtures, "valid")
	old, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range real {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTicketSchemaFixtures: the valid fixtures are one of each form the
// code writes (regenerate with -update-ticket-fixtures when a form is
// added), each read by ParseTicket and valid under the schema.
func TestTicketSchemaFixtures(t *testing.T) {
	t.Parallel()
	sch := ticketSchema(t)
	paths, err := filepath.Glob(filepath.Join(ticketFixtures, "valid", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, strings.TrimSuffix(filepath.Base(p), ".json"))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := claimcheck.ParseTicket(b); err != nil {
			t.Errorf("%s: ParseTicket: %v", p, err)
		}
		if err := schemaErr(sch, b); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	slices.Sort(names)
	var want []string
	for name := range realTickets(t) {
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("fixtures %q, the code writes %q: run go test -run TestTicketSchemaAcceptsRealTickets -update-ticket-fixtures .", names, want)
	}
}

// invalidTicketCase is one entry of testdata/tickets/invalid.json.
type invalidTicketCase struct {
	Name string `json:"name"`
	// RefusedBy: "json" (not one JSON document), "schema" (the schema and
	// ParseTicket), "schema-only" (the schema; ParseTicket reads it, a form
	// no writer produces), "beyond" (ParseTicket and the clients' checks
	// of what the schema cannot say; the schema accepts it).
	RefusedBy string `json:"refused_by"`
	Ticket    string `json:"ticket"`
}

func invalidTicketCases(t testing.TB) []invalidTicketCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ticketFixtures, "invalid.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []invalidTicketCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("invalid.json: %v", err)
	}
	return doc.Cases
}

// TestTicketSchemaRefusesInvalid: each invalid case is refused by the
// checks its refused_by names, and only by those.
func TestTicketSchemaRefusesInvalid(t *testing.T) {
	t.Parallel()
	sch := ticketSchema(t)
	cases := invalidTicketCases(t)
	seen := map[string]int{}
	for _, c := range cases {
		seen[c.RefusedBy]++
		t.Run(c.Name, func(t *testing.T) {
			b := []byte(c.Ticket)
			_, parseErr := claimcheck.ParseTicket(b)
			if c.RefusedBy == "json" {
				if json.Valid(b) {
					t.Fatal("case says it is not JSON, but it is one JSON document")
				}
				assertIs(t, parseErr, claimcheck.ErrTicketInvalid)
				return
			}
			schErr := schemaErr(sch, b)
			switch c.RefusedBy {
			case "schema":
				if schErr == nil {
					t.Error("the schema accepts it")
				}
				assertIs(t, parseErr, claimcheck.ErrTicketInvalid)
			case "schema-only":
				if schErr == nil {
					t.Error("the schema accepts it")
				}
				if parseErr != nil {
					t.Errorf("ParseTicket refuses it (%v): it belongs under \"schema\"", parseErr)
				}
			case "beyond":
				if schErr != nil {
					t.Errorf("the schema refuses it (%v): it belongs under \"schema\"", schErr)
				}
				assertIs(t, parseErr, claimcheck.ErrTicketInvalid)
			default:
				t.Fatalf("unknown refused_by %q", c.RefusedBy)
			}
		})
	}
	for _, by := range []string{"json", "schema", "schema-only", "beyond"} {
		if seen[by] == 0 {
			t.Errorf("no case refused by %q", by)
		}
	}
}

// sigForm and b64Form are the shapes the code writes for sig and dek.
// ParseTicket leaves checking them to the signature check and the keeper,
// so the fuzz target below holds only for tickets that have them.
var (
	sigForm = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)
	b64Form = regexp.MustCompile(`^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`)
)

// FuzzTicketSchema: whatever ParseTicket accepts, written again by Marshal
// (what a relay or replay writes), is valid under the schema.
func FuzzTicketSchema(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join(ticketFixtures, "valid", "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1024 {
			f.Add(b)
		}
	}
	for _, c := range invalidTicketCases(f) {
		f.Add([]byte(c.Ticket))
	}
	sch := ticketSchema(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := claimcheck.ParseTicket(b)
		if err != nil {
			return
		}
		if (tk.Sig != "" && !sigForm.MatchString(tk.Sig)) || (tk.DEK != "" && !b64Form.MatchString(tk.DEK)) {
			return
		}
		out, err := tk.Marshal()
		if err != nil {
			t.Fatalf("ParseTicket accepts what Marshal refuses: %v", err)
		}
		if err := schemaErr(sch, out); err != nil {
			t.Fatalf("the schema refuses a ticket ParseTicket read: %v\n%s", err, out)
		}
	})
}
