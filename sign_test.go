package claimcheck_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
)

// countingBucket is a driver.Bucket that wraps the real fileblob driver and
// counts every call that reaches it. gocloud exposes fileblob's driver only
// behind the *blob.Bucket that fileblob.OpenBucket returns, so each method
// forwards to that bucket (and so to the real driver, on the real files)
// after counting. A store built over blob.NewBucket(countingBucket) behaves
// as a file:// store, and fetches() tells whether it touched the store.
type countingBucket struct {
	real  *blob.Bucket
	reads atomic.Int64 // Attributes, NewRangeReader, ListPaged, SignedURL
	other atomic.Int64 // writes, copies, deletes
}

func (c *countingBucket) calls() int64 { return c.reads.Load() + c.other.Load() }

func (c *countingBucket) ErrorCode(err error) gcerrors.ErrorCode { return gcerrors.Code(err) }
func (c *countingBucket) As(i any) bool                          { return c.real.As(i) }
func (c *countingBucket) ErrorAs(err error, i any) bool          { return c.real.ErrorAs(err, i) }
func (c *countingBucket) Close() error                           { return nil } // the test closes real

func (c *countingBucket) Attributes(ctx context.Context, key string) (*driver.Attributes, error) {
	c.reads.Add(1)
	a, err := c.real.Attributes(ctx, key)
	if err != nil {
		return nil, err
	}
	return &driver.Attributes{
		CacheControl: a.CacheControl, ContentDisposition: a.ContentDisposition, ContentEncoding: a.ContentEncoding,
		ContentLanguage: a.ContentLanguage, ContentType: a.ContentType, Metadata: a.Metadata,
		CreateTime: a.CreateTime, ModTime: a.ModTime, Size: a.Size, MD5: a.MD5, ETag: a.ETag, AsFunc: a.As,
	}, nil
}

func (c *countingBucket) ListPaged(ctx context.Context, opts *driver.ListOptions) (*driver.ListPage, error) {
	c.reads.Add(1)
	token, size := opts.PageToken, opts.PageSize
	if len(token) == 0 {
		token = blob.FirstPageToken
	}
	if size <= 0 {
		size = 1000
	}
	objs, next, err := c.real.ListPage(ctx, token, size, &blob.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter})
	if err != nil {
		return nil, err
	}
	page := &driver.ListPage{NextPageToken: next}
	for _, o := range objs {
		page.Objects = append(page.Objects, &driver.ListObject{Key: o.Key, ModTime: o.ModTime, Size: o.Size, MD5: o.MD5, IsDir: o.IsDir, AsFunc: o.As})
	}
	return page, nil
}

func (c *countingBucket) NewRangeReader(ctx context.Context, key string, offset, length int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	c.reads.Add(1)
	r, err := c.real.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, err
	}
	return countedReader{r}, nil
}

type countedReader struct{ r *blob.Reader }

func (r countedReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r countedReader) Close() error               { return r.r.Close() }
func (r countedReader) As(i any) bool              { return r.r.As(i) }
func (r countedReader) Attributes() *driver.ReaderAttributes {
	return &driver.ReaderAttributes{ContentType: r.r.ContentType(), ModTime: r.r.ModTime(), Size: r.r.Size()}
}

func (c *countingBucket) NewTypedWriter(ctx context.Context, key, contentType string, opts *driver.WriterOptions) (driver.Writer, error) {
	c.other.Add(1)
	return c.real.NewWriter(ctx, key, &blob.WriterOptions{
		ContentType: contentType, Metadata: opts.Metadata, IfNotExist: opts.IfNotExist, BeforeWrite: opts.BeforeWrite,
		CacheControl: opts.CacheControl, ContentDisposition: opts.ContentDisposition, ContentEncoding: opts.ContentEncoding,
		ContentLanguage: opts.ContentLanguage, ContentMD5: opts.ContentMD5,
	})
}

func (c *countingBucket) Copy(ctx context.Context, dstKey, srcKey string, _ *driver.CopyOptions) error {
	c.other.Add(1)
	return c.real.Copy(ctx, dstKey, srcKey, nil)
}

func (c *countingBucket) Delete(ctx context.Context, key string, _ *driver.DeleteOptions) error {
	c.other.Add(1)
	return c.real.Delete(ctx, key)
}

func (c *countingBucket) SignedURL(ctx context.Context, key string, opts *driver.SignedURLOptions) (string, error) {
	c.reads.Add(1)
	return c.real.SignedURL(ctx, key, &blob.SignedURLOptions{Expiry: opts.Expiry, Method: opts.Method, ContentType: opts.ContentType})
}

// countingStore opens a store over the files of root through a
// countingBucket.
func countingStore(t *testing.T, root string, opts *claimcheck.Options) (*claimcheck.Store, *countingBucket) {
	t.Helper()
	real, err := fileblob.OpenBucket(root, &fileblob.Options{NoTempDir: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = real.Close() })
	c := &countingBucket{real: real}
	o := *opts
	o.SpoolDir = filepath.Join(t.TempDir(), "spool")
	s, err := claimcheck.NewStore(blob.NewBucket(c), &o)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

var (
	secretA = []byte("deployment secret A, 32 bytes..!")
	secretB = []byte("deployment secret B, 32 bytes..!")
)

// TestSignRoundTrip checks in every corpus PDF with signing on: each
// ticket carries a 43-character base64url HMAC, survives the wire, claims
// the exact bytes, and offloaded ones stay within MaxTicketBytes.
func TestSignRoundTrip(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		opts claimcheck.Options
	}{
		{"Plain", claimcheck.Options{Secret: secretA, SignTickets: true}},
		{"Encrypted", claimcheck.Options{Secret: secretA, SignTickets: true, Keeper: newKeeper(t)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, &tc.opts)
			tenant := strings.Repeat("t", claimcheck.MaxTenantLen) // the longest tickets
			for _, f := range corpus(t) {
				for _, opts := range []*claimcheck.CheckInOptions{
					{ContentType: "application/pdf"},
					{ContentType: "application/pdf", Name: "docs/" + f.name, Version: "2026-11-29T21.34.24Z"},
				} {
					tk := b.checkIn(t, tenant, f.data, opts)
					if len(tk.Sig) != 43 {
						t.Fatalf("%s: Sig %q is %d characters, want 43", f.name, tk.Sig, len(tk.Sig))
					}
					if mac, err := base64.RawURLEncoding.DecodeString(tk.Sig); err != nil || len(mac) != 32 {
						t.Fatalf("%s: Sig %q is not base64url of 32 bytes: %v", f.name, tk.Sig, err)
					}
					wire := mustMarshal(t, tk)
					if !tk.IsInline() && len(wire) > claimcheck.MaxTicketBytes {
						t.Fatalf("%s: signed ticket is %d bytes, budget %d:\n%s", f.name, len(wire), claimcheck.MaxTicketBytes, wire)
					}
					parsed, err := claimcheck.ParseTicket(wire)
					if err != nil {
						t.Fatalf("%s: ParseTicket: %v", f.name, err)
					}
					if parsed.Sig != tk.Sig {
						t.Fatalf("%s: Sig after the wire %q, before %q", f.name, parsed.Sig, tk.Sig)
					}
					got, err := readAllOpen(b.ctx, b.store, parsed)
					if err != nil || sha256Hex(got) != sha256Hex(f.data) {
						t.Fatalf("%s: claim of the parsed ticket: %d bytes, %v", f.name, len(got), err)
					}
				}
			}
			// Inline tickets are signed too, and the signature covers the
			// inline bytes (and the wrapped key, when encrypted).
			itk := b.checkIn(t, "acme", []byte("inline "+payloadMarker), nil)
			if !itk.IsInline() || len(itk.Sig) != 43 {
				t.Fatalf("inline ticket: inline=%v Sig %q", itk.IsInline(), itk.Sig)
			}
			parsed, err := claimcheck.ParseTicket(mustMarshal(t, itk))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := readAllOpen(b.ctx, b.store, parsed); err != nil || string(got) != "inline "+payloadMarker {
				t.Fatalf("inline claim: %q, %v", got, err)
			}
			altered := *parsed
			altered.Inline = bytes.Clone(parsed.Inline)
			altered.Inline[len(altered.Inline)-1] ^= 1
			_, err = b.store.Claim(&altered)
			assertIs(t, err, claimcheck.ErrTicketForbidden)
		})
	}
}

// TestSignDeterministic checks that the signature is a function of the
// ticket's content: a ticket re-encoded by the wire (even with fields in
// another order, or an unknown field a newer minor version added) keeps
// its signature, and every field is covered.
func TestSignDeterministic(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{Secret: secretA, SignTickets: true})
	_, tk := claimed(t, b, 100_000)

	reordered := `{"sig":"` + tk.Sig + `","size":100000,"created":"` + tk.Created.Format("2006-01-02T15:04:05.999999999Z07:00") +
		`","sha256":"` + tk.SHA256 + `","key":"` + tk.Key + `","store":"default","tenant":"acme","type":"application/pdf","v":1,"x-future":true}`
	parsed, err := claimcheck.ParseTicket([]byte(reordered))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Claim(parsed); err != nil {
		t.Fatalf("reordered ticket: %v", err)
	}

	for name, f := range map[string]func(tk *claimcheck.Ticket){
		"Size":        func(tk *claimcheck.Ticket) { tk.Size++ },
		"ContentType": func(tk *claimcheck.Ticket) { tk.ContentType = "text/plain" },
		"Created":     func(tk *claimcheck.Ticket) { tk.Created = tk.Created.Add(1) },
		"Digest":      func(tk *claimcheck.Ticket) { tk.SHA256 = strings.Repeat("0", 64) },
		"SigCase":     func(tk *claimcheck.Ticket) { tk.Sig = strings.ToUpper(tk.Sig) },
		"SigPadded":   func(tk *claimcheck.Ticket) { tk.Sig += "=" },
	} {
		bad := *tk
		f(&bad)
		if _, err := b.store.Claim(&bad); !errors.Is(err, claimcheck.ErrTicketForbidden) {
			t.Errorf("%s altered: Claim error = %v, want ErrTicketForbidden", name, err)
		}
	}
}

// TestSignForgedRefusedBeforeFetch claims forged tickets on a worker that
// serves tenant alpha only, through a countingBucket: each is refused as
// permanent (ticket-forbidden or ticket-invalid) with no call reaching the
// store. Each forgery points at bytes that exist and match its digest, so a
// fetch would have succeeded: the refusal comes before any use.
func TestSignForgedRefusedBeforeFetch(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "bucket")

	// The producers: signing with secret A, and an impostor with secret B.
	producer := open(t, "file://"+root, &claimcheck.Options{Secret: secretA, SignTickets: true})
	impostor := open(t, "file://"+root, &claimcheck.Options{Secret: secretB, SignTickets: true})
	alphaData, betaData := randomBytes(100_000, 11), randomBytes(100_000, 12)
	alpha := producer.checkIn(t, "alpha", alphaData, nil)
	alpha2 := producer.checkIn(t, "alpha", randomBytes(90_000, 13), nil)
	beta := producer.checkIn(t, "beta", betaData, nil)
	betaInline := producer.checkIn(t, "beta", []byte("beta inline "+payloadMarker), nil)
	foreignSecret := impostor.checkIn(t, "alpha", randomBytes(80_000, 14), nil)

	signed, signedCount := countingStore(t, root, &claimcheck.Options{Secret: secretA, SignTickets: true, Tenants: []string{"alpha"}})
	unsigned, unsignedCount := countingStore(t, root, &claimcheck.Options{Tenants: []string{"alpha"}})

	// Controls: a good ticket claims through each counting store, and the
	// count sees it (so a zero below means something).
	for name, c := range map[string]struct {
		s *claimcheck.Store
		n *countingBucket
	}{"signed": {signed, signedCount}, "unsigned": {unsigned, unsignedCount}} {
		if got, err := readAllOpen(t.Context(), c.s, alpha); err != nil || !bytes.Equal(got, alphaData) {
			t.Fatalf("%s control: %d bytes, %v", name, len(got), err)
		}
		if c.n.reads.Load() == 0 {
			t.Fatalf("%s control: the claim reached the store without being counted", name)
		}
	}
	// The unsigned worker accepts a ticket repointed at another alpha
	// object (its key, digest and size): the bytes there are valid. Only a
	// signature stops that.
	repointed := *alpha
	repointed.Key, repointed.SHA256, repointed.Size = alpha2.Key, alpha2.SHA256, alpha2.Size
	if _, err := readAllOpen(t.Context(), unsigned, &repointed); err != nil {
		t.Fatalf("control: the repointed ticket does not claim on an unsigned worker: %v", err)
	}
	// A traversal that fileblob would resolve onto a real object: the
	// driver itself reads it, when asked.
	dotKey := strings.Replace(alpha.Key, "payloads/alpha/", "payloads/alpha/./", 1)
	if r, err := signedCount.real.NewReader(t.Context(), dotKey, nil); err != nil {
		t.Fatalf("control: fileblob does not resolve %q: %v", dotKey, err)
	} else {
		got, _ := io.ReadAll(r)
		r.Close()
		if !bytes.Equal(got, alphaData) {
			t.Fatal("control: the ./ key reads other bytes")
		}
	}

	betaShard := strings.TrimPrefix(beta.Key, "payloads/beta/") // "xx/<digest>"
	withKey := func(key string) func(tk *claimcheck.Ticket) {
		return func(tk *claimcheck.Ticket) { *tk = *beta; tk.Tenant = "alpha"; tk.Key = key }
	}
	type forgery struct {
		name   string
		base   *claimcheck.Ticket
		f      func(tk *claimcheck.Ticket)
		reason string
		stores string // "both", or "signed" where only a signature can tell
	}
	forgeries := []forgery{
		{"ForeignTenant", beta, nil, claimcheck.ReasonTicketForbidden, "both"},
		{"ForeignTenantInline", betaInline, nil, claimcheck.ReasonTicketForbidden, "both"},
		{"ForeignTenantUnknown", alpha, func(tk *claimcheck.Ticket) {
			tk.Tenant = "gamma"
			tk.Key = "payloads/gamma/" + strings.TrimPrefix(alpha.Key, "payloads/alpha/")
		}, claimcheck.ReasonTicketForbidden, "both"},
		{"DotDot", beta, withKey("payloads/alpha/../beta/" + betaShard), claimcheck.ReasonTicketInvalid, "both"},
		{"DotDotResults", beta, withKey("results/alpha/../../payloads/beta/" + betaShard), claimcheck.ReasonTicketInvalid, "both"},
		{"Dot", alpha, func(tk *claimcheck.Ticket) { tk.Key = dotKey }, claimcheck.ReasonTicketInvalid, "both"},
		{"TrailingDotDot", alpha, func(tk *claimcheck.Ticket) { tk.Key = alpha.Key + "/.." }, claimcheck.ReasonTicketInvalid, "both"},
		{"DoubleSlash", alpha, func(tk *claimcheck.Ticket) { tk.Key = strings.Replace(alpha.Key, "alpha/", "alpha//", 1) }, claimcheck.ReasonTicketInvalid, "both"},
		{"Absolute", alpha, func(tk *claimcheck.Ticket) { tk.Key = "/etc/passwd" }, claimcheck.ReasonTicketInvalid, "both"},
		{"AbsoluteOwnKey", alpha, func(tk *claimcheck.Ticket) { tk.Key = "/" + alpha.Key }, claimcheck.ReasonTicketInvalid, "both"},
		{"FileURL", alpha, func(tk *claimcheck.Ticket) { tk.Key = "file:///etc/passwd" }, claimcheck.ReasonTicketInvalid, "both"},
		{"OtherTenantPrefix", beta, withKey(beta.Key), claimcheck.ReasonTicketInvalid, "both"},
		{"OtherTenantResults", beta, withKey("results/beta/" + betaShard), claimcheck.ReasonTicketInvalid, "both"},
		{"TenantPrefixOnly", beta, withKey("payloads/alphabet/" + betaShard), claimcheck.ReasonTicketInvalid, "both"},
		{"PercentDotDot", beta, withKey("payloads/alpha/%2e%2e/beta/" + betaShard), claimcheck.ReasonTicketInvalid, "both"},
		{"PercentSlash", beta, withKey("payloads/alpha/..%2fbeta%2f" + strings.ReplaceAll(betaShard, "/", "%2f")), claimcheck.ReasonTicketInvalid, "both"},
		{"Backslashes", beta, withKey(`payloads/alpha/..\beta\` + strings.ReplaceAll(betaShard, "/", `\`)), claimcheck.ReasonTicketInvalid, "both"},
		{"AllBackslashes", alpha, func(tk *claimcheck.Ticket) { tk.Key = strings.ReplaceAll(alpha.Key, "/", `\`) }, claimcheck.ReasonTicketInvalid, "both"},
		{"NUL", alpha, func(tk *claimcheck.Ticket) { tk.Key = alpha.Key + "\x00" }, claimcheck.ReasonTicketInvalid, "both"},
		{"Sidecar", alpha, func(tk *claimcheck.Ticket) { tk.Key = alpha.Key + ".attrs" }, claimcheck.ReasonTicketInvalid, "both"},
		{"TempFile", alpha, func(tk *claimcheck.Ticket) { tk.Key = alpha.Key + ".tmp" }, claimcheck.ReasonTicketInvalid, "both"},
		{"UnicodeDots", beta, withKey("payloads/alpha/\u2024\u2024/beta/" + betaShard), claimcheck.ReasonTicketInvalid, "both"},
		{"VersionTraversal", alpha, func(tk *claimcheck.Ticket) { tk.Key = "payloads/alpha/named/x@../../beta" }, claimcheck.ReasonTicketInvalid, "both"},
		// What only a signature can refuse: content that validates.
		{"Repointed", &repointed, nil, claimcheck.ReasonTicketForbidden, "signed"},
		{"AlteredDigest", alpha, func(tk *claimcheck.Ticket) { tk.SHA256 = alpha2.SHA256 }, claimcheck.ReasonTicketForbidden, "signed"},
		{"AlteredSize", alpha, func(tk *claimcheck.Ticket) { tk.Size-- }, claimcheck.ReasonTicketForbidden, "signed"},
		{"Unsigned", alpha, func(tk *claimcheck.Ticket) { tk.Sig = "" }, claimcheck.ReasonTicketForbidden, "signed"},
		{"OtherSecret", foreignSecret, nil, claimcheck.ReasonTicketForbidden, "signed"},
		{"OtherTicketsSig", alpha, func(tk *claimcheck.Ticket) { tk.Sig = alpha2.Sig }, claimcheck.ReasonTicketForbidden, "signed"},
	}
	signedCount.reads.Store(0)
	unsignedCount.reads.Store(0)
	for _, fg := range forgeries {
		tk := *fg.base
		if fg.f != nil {
			fg.f(&tk)
		}
		for name, c := range map[string]struct {
			s *claimcheck.Store
			n *countingBucket
		}{"signed": {signed, signedCount}, "unsigned": {unsigned, unsignedCount}} {
			if fg.stores == "signed" && name != "signed" {
				continue
			}
			ctx := t.Context()
			p, err := c.s.Claim(&tk)
			checkRefused(t, fg.name+" "+name+" Claim", err, fg.reason)
			if p != nil {
				t.Errorf("%s %s: Claim returned a payload with its error", fg.name, name)
			}
			_, err = c.s.Stat(ctx, &tk)
			checkRefused(t, fg.name+" "+name+" Stat", err, fg.reason)
			ran := false
			_, err = c.s.Work(ctx, &claimcheck.Job{Kind: "pdf", Tenant: tk.Tenant, Attempt: 1}, &tk,
				claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) { ran = true; return nil, nil }))
			checkRefused(t, fg.name+" "+name+" Work", err, fg.reason)
			if ran {
				t.Errorf("%s %s: the handler ran", fg.name, name)
			}
			if n := c.n.calls(); n != 0 {
				t.Fatalf("%s %s: %d calls reached the store before the refusal", fg.name, name, n)
			}
		}
	}
}

func checkRefused(t *testing.T, what string, err error, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted", what)
	}
	if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != reason {
		t.Errorf("%s: IsPermanent=%v Reason=%q, want permanent %q (%v)", what, claimcheck.IsPermanent(err), claimcheck.Reason(err), reason, err)
	}
	assertNoMarker(t, what+" error", err.Error())
}
