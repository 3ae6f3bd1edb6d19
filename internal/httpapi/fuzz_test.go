package httpapi_test

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/httpapi"
	"github.com/claimcheck/claimcheck/pipeline"
)

// FuzzParseContentDigest: any header either parses to a 32-byte digest
// that formats back to a sha-256 member of the header, or is refused or
// ignored; it never panics.
func FuzzParseContentDigest(f *testing.F) {
	sum := sha256.Sum256([]byte("x"))
	good := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	for _, s := range []string{"", good, "sha-512=:AAAA:, " + good, good + ";p=1", "sha-256=:AAAA:", "sha-256=abc", "=:", ",,", "SHA-256=:x:", good + "," + good, strings.Repeat("a", 2000)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		d, ok, err := httpapi.ParseContentDigest(h)
		if err != nil {
			if ok || d != nil {
				t.Fatalf("error %v with a digest", err)
			}
			return
		}
		if !ok {
			if d != nil {
				t.Fatal("no digest reported, but one returned")
			}
			return
		}
		if len(d) != sha256.Size {
			t.Fatalf("digest of %d bytes", len(d))
		}
		if !strings.Contains(h, base64.StdEncoding.EncodeToString(d)) {
			t.Fatalf("digest %x is not in header %q", d, h)
		}
	})
}

// FuzzParseSubmitQuery: whatever the query, an accepted one has a valid
// kind and tenant and in-range numbers.
func FuzzParseSubmitQuery(f *testing.F) {
	for _, s := range []string{"kind=render&tenant=acme", "kind=render&tenant=acme&priority=4&max_attempts=3", "kind=render&tenant=acme&allow_empty=true", "kind=render&tenant=acme&allow_empty=yes", "kind=a&kind=b&tenant=x", "tenant=%zz", "kind=render&tenant=acme&priority=-1", "&&&", "kind=r%00&tenant=a", "kind=r&tenant=a&store=cold&attach=a.pdf&attach=b.txt", "kind=r&tenant=a&attach=../x", "kind=r&tenant=a&store=Bad_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		sq, err := httpapi.ParseSubmitQuery(q)
		kind, tenant, prio, attempts := sq.Kind, sq.Tenant, sq.Priority, sq.MaxAttempts
		if err != nil {
			if !utf8.ValidString(err.Error()) && utf8.ValidString(q) {
				t.Fatalf("error message is not UTF-8: %q", err)
			}
			return
		}
		if pipeline.ValidateKind(kind) != nil || claimcheck.ValidateTenant(tenant) != nil || prio < 0 || prio > 4 || attempts < 0 || attempts > 100 {
			t.Fatalf("accepted %q: kind %q tenant %q priority %d attempts %d", q, kind, tenant, prio, attempts)
		}
		if sq.Store != "" && pipeline.ValidateStoreName(sq.Store) != nil {
			t.Fatalf("accepted %q: store %q", q, sq.Store)
		}
		if len(sq.Attachments) > 0 && claimcheck.ValidateAttachmentNames(sq.Attachments) != nil {
			t.Fatalf("accepted %q: attachments %q", q, sq.Attachments)
		}
	})
}

// FuzzParseClaimQuery: an accepted claim query has a valid kind, at most
// 16 valid distinct tenants, and a wait of -1 or 0 to 60.
func FuzzParseClaimQuery(f *testing.F) {
	for _, s := range []string{"kind=render", "kind=render&tenant=a&tenant=b&wait=0", "kind=render&wait=61", "kind=&tenant=", "wait=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		kind, tenants, wait, err := httpapi.ParseClaimQuery(q)
		if err != nil {
			return
		}
		if pipeline.ValidateKind(kind) != nil || len(tenants) > 16 || wait < -1 || wait > 60 {
			t.Fatalf("accepted %q: %q %q %d", q, kind, tenants, wait)
		}
		seen := map[string]bool{}
		for _, tn := range tenants {
			if claimcheck.ValidateTenant(tn) != nil || seen[tn] {
				t.Fatalf("accepted %q: tenant %q", q, tn)
			}
			seen[tn] = true
		}
	})
}

// FuzzCleanMessage: a recorded failure message is valid UTF-8, has no
// control characters and is at most MaxFailureMessage bytes.
func FuzzCleanMessage(f *testing.F) {
	for _, s := range []string{"", "ok", "a\x00b\nc", strings.Repeat("é", 2000), "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := httpapi.CleanMessage(s)
		if !utf8.ValidString(m) || len(m) > httpapi.MaxFailureMessage || m == "" {
			t.Fatalf("CleanMessage(%q) = %q", s, m)
		}
		for _, r := range m {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("CleanMessage(%q) keeps control character %q", s, r)
			}
		}
	})
}
