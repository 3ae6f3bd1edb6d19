package claimcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

// consignment is the README's example job: a consignment's paperwork,
// three corpus PDFs.
var consignment = []struct{ name, file string }{
	{"label.pdf", "pixel.pdf"},
	{"commercial-invoice.pdf", "refcard-a4.pdf"},
	{"customs-declaration.pdf", "bash.pdf"},
}

func TestValidateAttachmentName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"label.pdf", "a", "customs-declaration.pdf", "v1.2_final+signed.PDF", strings.Repeat("n", claimcheck.MaxAttachmentNameLen)} {
		if err := claimcheck.ValidateAttachmentName(ok); err != nil {
			t.Errorf("ValidateAttachmentName(%q) = %v, want nil", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":                      "empty",
		"a/b.pdf":               "path separator",
		`a\b.pdf`:               "path separator",
		"/etc/passwd":           "path separator",
		"..":                    `contains ".."`,
		"a..b":                  `contains ".."`,
		".hidden":               "starts with '.'",
		"label pdf":             `character ' '`,
		"naïve.pdf":             "character",
		"nul\x00.pdf":           "character",
		strings.Repeat("n", 65): "65 bytes, at most 64",
		"label.pdf\n":           "character",
		"C:x":                   "character ':'",
	} {
		err := claimcheck.ValidateAttachmentName(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateAttachmentName(%q) = %v, want an error saying %q", name, err, want)
		}
	}
	if err := claimcheck.ValidateAttachmentNames([]string{"a.pdf", "b.pdf", "a.pdf"}); err == nil || !strings.Contains(err.Error(), `"a.pdf" given twice`) {
		t.Errorf("a repeated name: %v", err)
	}
	if err := claimcheck.ValidateAttachmentNames(nil); err == nil || !strings.Contains(err.Error(), "no attachments") {
		t.Errorf("no names: %v", err)
	}
	many := make([]string, claimcheck.MaxAttachments+1)
	for i := range many {
		many[i] = fmt.Sprintf("doc-%d.pdf", i)
	}
	if err := claimcheck.ValidateAttachmentNames(many); err == nil || !strings.Contains(err.Error(), "33 attachments, at most 32") {
		t.Errorf("33 names: %v", err)
	}
	if err := claimcheck.ValidateAttachmentNames(many[:claimcheck.MaxAttachments]); err != nil {
		t.Errorf("32 names: %v", err)
	}
}

// checkInConsignment checks the consignment's PDFs and a main payload in
// and returns the manifest's ticket and the files' bytes by name.
func checkInConsignment(t *testing.T, b *testBundle) (*claimcheck.Ticket, map[string][]byte) {
	t.Helper()
	m := &claimcheck.Manifest{Version: claimcheck.ManifestVersion}
	files := map[string][]byte{}
	main, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader("consignment 42: 3 documents"), &claimcheck.CheckInOptions{ContentType: "text/plain", Offload: true})
	if err != nil {
		t.Fatal(err)
	}
	m.Payload = main
	for _, c := range consignment {
		data, err := os.ReadFile(filepath.Join("testdata", "pdf", c.file))
		if err != nil {
			t.Fatal(err)
		}
		files[c.name] = data
		at, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader(string(data)), &claimcheck.CheckInOptions{ContentType: "application/pdf", Offload: true})
		if err != nil {
			t.Fatal(err)
		}
		m.Attachments = append(m.Attachments, claimcheck.Attachment{Name: c.name, Ticket: at})
	}
	tk, err := b.store.CheckInManifest(b.ctx, "acme", m, nil)
	if err != nil {
		t.Fatalf("CheckInManifest: %v", err)
	}
	return tk, files
}

// TestRunManifest: the worker's one claim path (Store.Run) hands the
// handler every attachment verified, by name, and the main payload; a
// deleted attachment fails the job as payload-missing naming it, before
// the handler runs.
func TestRunManifest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts *claimcheck.Options
	}{
		{"Plain", nil},
		{"SealedSigned", &claimcheck.Options{Keeper: newKeeper(t), Secret: []byte("0123456789abcdef0123"), SignTickets: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.opts)
			tk, files := checkInConsignment(t, b)
			enc, err := tk.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("consignment ticket (3 attachments): %d bytes", len(enc))
			if len(enc) > claimcheck.MaxTicketBytes || !tk.Manifest || tk.IsInline() {
				t.Fatalf("ticket of %d bytes, manifest %t, inline %t", len(enc), tk.Manifest, tk.IsInline())
			}
			parsed, err := claimcheck.ParseTicket(enc)
			if err != nil || !parsed.Manifest {
				t.Fatalf("ParseTicket: %v (manifest %t)", err, parsed != nil && parsed.Manifest)
			}

			seen := map[string]string{}
			h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
				r, err := job.Payload.Open(ctx)
				if err != nil {
					return nil, err
				}
				body, _ := io.ReadAll(r)
				r.Close()
				seen[""] = string(body)
				for name, p := range job.Attachments {
					r, err := p.Open(ctx)
					if err != nil {
						return nil, err
					}
					data, _ := io.ReadAll(r)
					r.Close()
					seen[name] = sha256Hex(data)
				}
				return nil, nil
			})
			job := &claimcheck.Job{ID: "1", Kind: "customs", Tenant: "acme", Attempt: 1}
			if _, err := b.store.Work(b.ctx, job, parsed, h); err != nil {
				t.Fatalf("Work: %v", err)
			}
			if seen[""] != "consignment 42: 3 documents" {
				t.Errorf("main payload %q", seen[""])
			}
			for name, data := range files {
				if seen[name] != sha256Hex(data) {
					t.Errorf("attachment %s: handler saw sha256 %q, want the file's", name, seen[name])
				}
			}
			if len(seen) != 4 {
				t.Errorf("handler saw %d documents, want 4", len(seen))
			}

			// One attachment deleted: payload-missing naming it, never its key.
			m, err := b.store.ReadManifest(b.ctx, parsed)
			if err != nil {
				t.Fatal(err)
			}
			gone := m.Attachments[2]
			if err := b.store.Bucket().Delete(b.ctx, gone.Ticket.Key); err != nil {
				t.Fatal(err)
			}
			ran := false
			_, err = b.store.Work(b.ctx, job, parsed, claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
				ran = true
				return nil, nil
			}))
			assertIs(t, err, claimcheck.ErrPayloadMissing)
			if ran {
				t.Error("the handler ran although an attachment was missing")
			}
			if !strings.Contains(err.Error(), `attachment "customs-declaration.pdf"`) || claimcheck.Reason(err) != claimcheck.ReasonPayloadMissing {
				t.Errorf("error %q (reason %s) does not name the attachment", err, claimcheck.Reason(err))
			}
			assertRedacted(t, err, gone.Ticket)
			assertRedacted(t, err, parsed)
		})
	}
}

// TestRunManifestTampered: a manifest whose bytes differ from its ticket
// (an attachment swapped behind the job) is payload-corrupt, and a
// ticket whose manifest flag was added by hand to an ordinary payload is
// refused as ticket-invalid; neither reaches the handler.
func TestRunManifestTampered(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{AlwaysOffload: true})
	tk, _ := checkInConsignment(t, b)
	// Another manifest's bytes at this manifest's key.
	other, err := b.store.CheckIn(b.ctx, "acme", strings.NewReader(`{"v":1,"attachments":[]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	forged := *other
	forged.Manifest = true
	never := claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
		t.Error("the handler ran")
		return nil, nil
	})
	job := &claimcheck.Job{ID: "1", Kind: "customs", Tenant: "acme", Attempt: 1}
	_, err = b.store.Work(b.ctx, job, &forged, never)
	assertIs(t, err, claimcheck.ErrTicketInvalid)
	if !strings.Contains(err.Error(), "no attachments") {
		t.Errorf("forged manifest: %v", err)
	}

	if err := os.WriteFile(filepath.Join(b.root, filepath.FromSlash(tk.Key)), []byte(`{"v":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = b.store.Work(b.ctx, job, tk, never)
	assertIs(t, err, claimcheck.ErrPayloadCorrupt)
}

// TestManifestTicketWorstCaseFitsBudget: the largest manifest ticket the
// input limits allow (the longest tenant and store name, a content key
// with its key tag, the largest manifest, an offset timestamp, a
// signature) fits MaxTicketBytes, whatever the number of attachments.
func TestManifestTicketWorstCaseFitsBudget(t *testing.T) {
	t.Parallel()
	tenant := strings.Repeat("t", claimcheck.MaxTenantLen)
	digest := strings.Repeat("f", 64)
	worst := &claimcheck.Ticket{
		Version:     claimcheck.TicketVersion,
		Tenant:      tenant,
		Store:       strings.Repeat("s", claimcheck.MaxStoreNameLen),
		Key:         claimcheck.PrefixPayloads + tenant + "/ff/" + digest + ".k0123abcd",
		SHA256:      digest,
		Size:        claimcheck.MaxManifestBytes,
		ContentType: claimcheck.ManifestContentType,
		Created:     time.Date(9999, 12, 31, 23, 59, 59, 123456789, time.FixedZone("", -(9*3600+30*60))),
		Manifest:    true,
		Sig:         strings.Repeat("S", 43),
	}
	enc, err := worst.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("worst-case manifest ticket: %d of %d bytes", len(enc), claimcheck.MaxTicketBytes)
	if len(enc) > claimcheck.MaxTicketBytes {
		t.Fatalf("%d bytes:\n%s", len(enc), enc)
	}
	big := *worst
	big.Size = claimcheck.MaxManifestBytes + 1
	if _, err := big.Marshal(); err == nil || !strings.Contains(err.Error(), "manifest of 65537 bytes") {
		t.Errorf("a manifest over the limit: %v", err)
	}
	inline := claimcheck.Ticket{Version: 1, Tenant: "acme", SHA256: digest, Size: 0, Created: time.Now(), Manifest: true}
	if _, err := inline.Marshal(); err == nil || !strings.Contains(err.Error(), "must name its object") {
		t.Errorf("an inline manifest ticket: %v", err)
	}
}

// validManifest is a manifest of tenant acme with two attachments.
func validManifest() []byte {
	tk := func(d string) string {
		return `{"v":1,"tenant":"acme","store":"default","key":"payloads/acme/` + d[:2] + `/` + d + `","sha256":"` + d + `","size":2771,"type":"application/pdf","created":"2026-12-01T15:00:00Z"}`
	}
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	return []byte(`{"v":1,"payload":` + tk(a) + `,"attachments":[{"name":"label.pdf","ticket":` + tk(a) + `},{"name":"invoice.pdf","ticket":` + tk(b) + `}]}`)
}

func TestParseManifest(t *testing.T) {
	t.Parallel()
	m, err := claimcheck.ParseManifest(validManifest(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Names(), ","); got != "label.pdf,invoice.pdf" || m.Payload == nil || len(m.Tickets()) != 3 {
		t.Fatalf("names %s, payload %v, %d tickets", got, m.Payload != nil, len(m.Tickets()))
	}
	valid := string(validManifest())
	for name, tc := range map[string]struct{ doc, want string }{
		"OtherTenant":  {valid, "of another tenant"},
		"Truncated":    {valid[:len(valid)-3], "truncated"},
		"Trailing":     {valid + "{}", "trailing data"},
		"NotObject":    {`[1]`, "not a manifest object"},
		"NoVersion":    {`{"attachments":[]}`, `no version field "v"`},
		"FutureMajor":  {`{"v":2,"attachments":[]}`, "unsupported major version 2 (this build reads 1)"},
		"Empty":        {`{"v":1,"attachments":[]}`, "no attachments"},
		"Traversal":    {strings.Replace(valid, `"invoice.pdf"`, `"../invoice.pdf"`, 1), "path separator"},
		"DotDot":       {strings.Replace(valid, `"invoice.pdf"`, `"invoice..pdf"`, 1), `contains ".."`},
		"Repeated":     {strings.Replace(valid, `"invoice.pdf"`, `"label.pdf"`, 1), "given twice"},
		"Inline":       {`{"v":1,"attachments":[{"name":"a","ticket":{"v":1,"tenant":"acme","sha256":"` + strings.Repeat("a", 64) + `","size":1,"created":"2026-12-01T15:00:00Z","inline":"YQ=="}}]}`, "is inline"},
		"NoTicket":     {`{"v":1,"attachments":[{"name":"a"}]}`, "has no ticket"},
		"Result":       {strings.ReplaceAll(valid, "payloads/acme/", "results/acme/"), "not under payloads/"},
		"WrongType":    {`{"v":1,"attachments":{}}`, "wrong type"},
		"BadTicket":    {strings.Replace(valid, `"size":2771`, `"size":-1`, 1), "negative size"},
		"TooLarge":     {`{"v":1,"x":"` + strings.Repeat("x", claimcheck.MaxManifestBytes) + `"}`, "more than 65536"},
		"NestedManife": {strings.Replace(valid, `"type":"application/pdf"`, `"type":"application/pdf","manifest":true`, 1), "itself a manifest"},
	} {
		tenant := "acme"
		if name == "OtherTenant" {
			tenant = "globex"
		}
		_, err := claimcheck.ParseManifest([]byte(tc.doc), tenant)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one saying %q", name, err, tc.want)
			continue
		}
		assertIs(t, err, claimcheck.ErrTicketInvalid)
		if strings.Contains(err.Error(), "payloads/acme/") {
			t.Errorf("%s: the error names a key: %v", name, err)
		}
	}
}

// FuzzParseManifest: ParseManifest never panics, and what it accepts
// encodes and parses again to the same manifest.
func FuzzParseManifest(f *testing.F) {
	f.Add(validManifest())
	f.Add([]byte(`{"v":1,"attachments":[]}`))
	f.Add([]byte(`{"v":1,"attachments":[{"name":"../x","ticket":null}]}`))
	f.Add([]byte(`{"v":1,"payload":null,"attachments":[{"name":"a","ticket":{"v":1}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := claimcheck.ParseManifest(b, "acme")
		if err != nil {
			if !errorsIs(err, claimcheck.ErrTicketInvalid) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		enc, err := m.Marshal("acme")
		if err != nil {
			t.Fatalf("accepted manifest does not encode: %v", err)
		}
		again, err := claimcheck.ParseManifest(enc, "acme")
		if err != nil {
			t.Fatalf("re-encoded manifest does not parse: %v", err)
		}
		a, _ := json.Marshal(m)
		c, _ := json.Marshal(again)
		if !reflect.DeepEqual(a, c) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", a, c)
		}
	})
}
