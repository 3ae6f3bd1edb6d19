package claimcheck_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
)

// sha256("hello")
const helloSHA = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

var testCreated = time.Date(2026, 11, 29, 21, 34, 24, 123456789, time.UTC)

func offloadedTicket() *claimcheck.Ticket {
	return &claimcheck.Ticket{
		Version:     claimcheck.TicketVersion,
		Tenant:      "acme",
		Store:       "default",
		Key:         "payloads/acme/2c/" + helloSHA,
		SHA256:      helloSHA,
		Size:        5,
		ContentType: "text/plain",
		Created:     testCreated,
	}
}

func inlineTicket(payload []byte) *claimcheck.Ticket {
	return &claimcheck.Ticket{
		Version: claimcheck.TicketVersion,
		Tenant:  "acme",
		SHA256:  sha256Hex(payload),
		Size:    int64(len(payload)),
		Created: testCreated,
		Inline:  payload,
	}
}

func mustMarshal(t *testing.T, tk *claimcheck.Ticket) []byte {
	t.Helper()
	b, err := tk.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	return b
}

func assertTicketsEqual(t *testing.T, got, want *claimcheck.Ticket) {
	t.Helper()
	if got.Version != want.Version || got.Tenant != want.Tenant || got.Store != want.Store ||
		got.Key != want.Key || got.SHA256 != want.SHA256 || got.Size != want.Size ||
		got.ContentType != want.ContentType || !got.Created.Equal(want.Created) ||
		!bytes.Equal(got.Inline, want.Inline) || got.DEK != want.DEK || got.Sig != want.Sig {
		t.Fatalf("ticket = %+v\nwant     %+v", got, want)
	}
}

func TestTicketRoundTrip(t *testing.T) {
	t.Parallel()

	t.Run("Offloaded", func(t *testing.T) {
		t.Parallel()
		tk := offloadedTicket()
		b := mustMarshal(t, tk)
		want := `{"v":1,"tenant":"acme","store":"default","key":"payloads/acme/2c/` + helloSHA +
			`","sha256":"` + helloSHA + `","size":5,"type":"text/plain","created":"2026-11-29T21:34:24.123456789Z"}`
		if string(b) != want {
			t.Fatalf("Marshal =\n%s\nwant\n%s", b, want)
		}
		got, err := claimcheck.ParseTicket(b)
		if err != nil {
			t.Fatalf("ParseTicket: %v", err)
		}
		assertTicketsEqual(t, got, tk)
		if got.IsInline() {
			t.Fatal("offloaded ticket parsed as inline")
		}
		if again := mustMarshal(t, got); !bytes.Equal(again, b) {
			t.Fatalf("re-Marshal =\n%s\nwant\n%s", again, b)
		}
	})

	t.Run("Inline", func(t *testing.T) {
		t.Parallel()
		tk := inlineTicket([]byte("hello"))
		b := mustMarshal(t, tk)
		want := `{"v":1,"tenant":"acme","sha256":"` + helloSHA +
			`","size":5,"created":"2026-11-29T21:34:24.123456789Z","inline":"aGVsbG8="}`
		if string(b) != want {
			t.Fatalf("Marshal =\n%s\nwant\n%s", b, want)
		}
		got, err := claimcheck.ParseTicket(b)
		if err != nil {
			t.Fatalf("ParseTicket: %v", err)
		}
		assertTicketsEqual(t, got, tk)
		if !got.IsInline() {
			t.Fatal("inline ticket parsed as offloaded")
		}
	})

	t.Run("EmptyInline", func(t *testing.T) {
		t.Parallel()
		tk := inlineTicket(nil)
		b := mustMarshal(t, tk)
		if bytes.Contains(b, []byte(`"inline"`)) {
			t.Fatalf("empty payload encodes an inline field: %s", b)
		}
		got, err := claimcheck.ParseTicket(b)
		if err != nil {
			t.Fatalf("ParseTicket: %v", err)
		}
		if got.Size != 0 || len(got.Inline) != 0 || got.SHA256 != sha256Hex(nil) {
			t.Fatalf("ParseTicket = %+v", got)
		}
	})

	t.Run("NonUTCCreated", func(t *testing.T) {
		t.Parallel()
		tk := offloadedTicket()
		tk.Created = testCreated.In(time.FixedZone("x", -(9*3600 + 30*60)))
		got, err := claimcheck.ParseTicket(mustMarshal(t, tk))
		if err != nil {
			t.Fatalf("ParseTicket: %v", err)
		}
		if !got.Created.Equal(testCreated) {
			t.Fatalf("Created = %v, want %v", got.Created, testCreated)
		}
	})
}

func TestParseTicketMalformed(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name, in, msg string
	}{
		{"Empty", ``, "truncated"},
		{"Whitespace", " \n\t", "truncated"},
		{"NotJSON", `hello`, "malformed JSON"},
		{"Array", `[1,2]`, "not a ticket object"},
		{"String", `"v"`, "not a ticket object"},
		{"Null", `null`, `no version field "v"`},
		{"EmptyObject", `{}`, `no version field "v"`},
		{"BadSyntax", `{"v":1,}`, "syntax error"},
		{"SingleQuotes", `{'v':1}`, "syntax error"},
		{"WrongSizeType", `{"v":1,"tenant":"acme","sha256":"` + helloSHA + `","size":"5","created":"2026-11-29T21:34:24Z"}`, `"size" has the wrong type`},
		{"VersionString", `{"v":"1"}`, "not a ticket object"},
		{"VersionFloat", `{"v":1.5}`, "not a ticket object"},
		{"BadCreated", `{"v":1,"tenant":"acme","sha256":"` + helloSHA + `","size":0,"created":"yesterday"}`, "undecodable"},
		{"NoCreated", `{"v":1,"tenant":"acme","sha256":"` + helloSHA + `","size":0}`, "no creation time"},
		{"BadDigest", `{"v":1,"tenant":"acme","sha256":"` + strings.ToUpper(helloSHA) + `","size":0,"created":"2026-11-29T21:34:24Z"}`, "sha256"},
		{"NegativeSize", `{"v":1,"tenant":"acme","key":"payloads/acme/x","store":"default","sha256":"` + helloSHA + `","size":-1,"created":"2026-11-29T21:34:24Z"}`, "negative size"},
		{"InlineSizeMismatch", `{"v":1,"tenant":"acme","sha256":"` + helloSHA + `","size":4,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8="}`, "inline payload is 5 bytes, size says 4"},
		{"BadBase64", `{"v":1,"tenant":"acme","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"!!!"}`, "undecodable"},
		{"KeyOfOtherTenant", `{"v":1,"tenant":"acme","store":"default","key":"payloads/beta/2c/` + helloSHA + `","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z"}`, "not under its tenant's prefix"},
		{"KeyTraversal", `{"v":1,"tenant":"acme","store":"default","key":"payloads/acme/../beta/x","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z"}`, "'..'"},
		{"KeyNoStore", `{"v":1,"tenant":"acme","key":"payloads/acme/x","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z"}`, "store name"},
		{"InlineWithStore", `{"v":1,"tenant":"acme","store":"default","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8="}`, "inline ticket names a store"},
		{"KeyAndInline", `{"v":1,"tenant":"acme","store":"default","key":"payloads/acme/x","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8="}`, "both a key and inline"},
		{"UppercaseTenant", `{"v":1,"tenant":"Acme","sha256":"` + helloSHA + `","size":0,"created":"2026-11-29T21:34:24Z"}`, "tenant has character 'A' at byte 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk, err := claimcheck.ParseTicket([]byte(tc.in))
			if tk != nil {
				t.Fatalf("ParseTicket returned a ticket: %+v", tk)
			}
			assertIs(t, err, claimcheck.ErrTicketInvalid)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not mention %q", err, tc.msg)
			}
			if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonTicketInvalid {
				t.Fatalf("IsPermanent=%v Reason=%q", claimcheck.IsPermanent(err), claimcheck.Reason(err))
			}
		})
	}
}

func TestParseTicketTruncated(t *testing.T) {
	t.Parallel()

	for name, tk := range map[string]*claimcheck.Ticket{
		"Offloaded": offloadedTicket(),
		"Inline":    inlineTicket([]byte("some inline payload bytes")),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := mustMarshal(t, tk)
			for i := range len(b) {
				got, err := claimcheck.ParseTicket(b[:i])
				if got != nil || !errorsIs(err, claimcheck.ErrTicketInvalid) {
					t.Fatalf("ParseTicket(first %d of %d bytes) = %v, %v; want ErrTicketInvalid", i, len(b), got, err)
				}
			}
			if _, err := claimcheck.ParseTicket(b); err != nil {
				t.Fatalf("ParseTicket(whole ticket): %v", err)
			}
		})
	}
}

func TestParseTicketTrailingData(t *testing.T) {
	t.Parallel()

	b := mustMarshal(t, offloadedTicket())
	for _, tail := range []string{"x", "{}", " 1", "\n" + string(b), "]", "null", `"`} {
		got, err := claimcheck.ParseTicket(append(bytes.Clone(b), tail...))
		if got != nil {
			t.Fatalf("ParseTicket(ticket+%q) returned a ticket", tail)
		}
		assertIs(t, err, claimcheck.ErrTicketInvalid)
		if tail != `"` && tail != "]" && tail != "x" && !strings.Contains(err.Error(), "trailing data") {
			t.Errorf("ParseTicket(ticket+%q) error %q does not mention trailing data", tail, err)
		}
	}
	// Whitespace around the document is not data.
	for _, ws := range []string{"\n", " \t\r\n"} {
		if _, err := claimcheck.ParseTicket(append(bytes.Clone(b), ws...)); err != nil {
			t.Errorf("ParseTicket(ticket+%q): %v", ws, err)
		}
	}
}

func TestParseTicketVersion(t *testing.T) {
	t.Parallel()

	valid := mustMarshal(t, offloadedTicket())
	withV := func(v string) []byte {
		return bytes.Replace(valid, []byte(`"v":1,`), []byte(v), 1)
	}
	for _, tc := range []struct {
		name string
		in   []byte
		msg  string
	}{
		{"Missing", withV(``), `no version field "v"`},
		{"Null", withV(`"v":null,`), `no version field "v"`},
		{"Zero", withV(`"v":0,`), "unsupported major version 0 (this build reads 1)"},
		{"FutureMajor", withV(`"v":2,`), "unsupported major version 2 (this build reads 1)"},
		{"Negative", withV(`"v":-1,`), "unsupported major version -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := claimcheck.ParseTicket(tc.in)
			assertIs(t, err, claimcheck.ErrTicketInvalid)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not say %q", err, tc.msg)
			}
		})
	}

	t.Run("FutureMajorWithNewShape", func(t *testing.T) {
		t.Parallel()
		// A v2 ticket need not look like v1 at all: refused on its version.
		_, err := claimcheck.ParseTicket([]byte(`{"v":2,"ref":{"bucket":"b","object":"o"},"digest":"blake3:00"}`))
		assertIs(t, err, claimcheck.ErrTicketInvalid)
		if !strings.Contains(err.Error(), "unsupported major version 2") {
			t.Fatalf("error %q does not name the version", err)
		}
	})
}

func TestParseTicketUnknownFieldsAccepted(t *testing.T) {
	t.Parallel()

	tk := offloadedTicket()
	b := mustMarshal(t, tk)
	extended := append(bytes.TrimSuffix(b, []byte("}")),
		`,"priority":7,"trace":{"id":"abc","spans":[1,2,3]},"zz":null}`...)
	got, err := claimcheck.ParseTicket(extended)
	if err != nil {
		t.Fatalf("ParseTicket with unknown fields: %v", err)
	}
	assertTicketsEqual(t, got, tk)
	// Unknown fields are dropped when the ticket is written again.
	if again := mustMarshal(t, got); !bytes.Equal(again, b) {
		t.Fatalf("re-Marshal = %s, want %s", again, b)
	}
}

// The marker is the payload: no error string may contain it, raw or base64.
const payloadMarker = "PAYLOAD-MARKER-9d1c7e"

func assertNoMarker(t *testing.T, what string, s string) {
	t.Helper()
	for _, m := range []string{
		payloadMarker,
		base64.StdEncoding.EncodeToString([]byte(payloadMarker)),
		"MARKER",
	} {
		if strings.Contains(s, m) {
			t.Fatalf("%s contains payload bytes %q: %s", what, m, s)
		}
	}
}

func TestTicketErrorsNeverContainPayload(t *testing.T) {
	t.Parallel()

	payload := []byte("before " + payloadMarker + " after")
	tk := inlineTicket(payload)
	b := mustMarshal(t, tk)
	if !bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString(payload))) {
		t.Fatalf("inline ticket does not carry the payload: %s", b)
	}

	// mutate decodes the valid ticket, applies f and re-encodes it.
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	inputs := map[string][]byte{
		"TrailingData":   append(bytes.Clone(b), b...),
		"FutureVersion":  mutate(func(m map[string]any) { m["v"] = 2 }),
		"NoVersion":      mutate(func(m map[string]any) { delete(m, "v") }),
		"SizeMismatch":   mutate(func(m map[string]any) { m["size"] = 3 }),
		"BadDigest":      mutate(func(m map[string]any) { m["sha256"] = "x" }),
		"InlineNotB64":   mutate(func(m map[string]any) { m["inline"] = payloadMarker }),
		"InlineWrongTyp": mutate(func(m map[string]any) { m["inline"] = []string{payloadMarker} }),
		"SizeIsPayload":  mutate(func(m map[string]any) { m["size"] = payloadMarker }),
		"TenantPayload":  mutate(func(m map[string]any) { m["tenant"] = payloadMarker }),
		"TypePayload":    mutate(func(m map[string]any) { m["type"] = "text/" + payloadMarker + "<>" }),
		"TypeParamsBad":  mutate(func(m map[string]any) { m["type"] = "text/plain; " + payloadMarker }),
		"StorePayload":   mutate(func(m map[string]any) { m["store"] = payloadMarker }),
		"KeyPayload":     mutate(func(m map[string]any) { m["key"] = "payloads/other/" + payloadMarker; m["store"] = "default" }),
		"BadSyntax":      bytes.Replace(b, []byte(`":`), []byte(`" `+payloadMarker), 1),
		"MarkerBareword": []byte(`{"v":1,` + payloadMarker + `}`),
	}
	for i := 1; i < len(b); i += 7 {
		inputs[fmt.Sprintf("Truncated%03d", i)] = b[:i]
	}
	for name, in := range inputs {
		_, err := claimcheck.ParseTicket(in)
		if !errorsIs(err, claimcheck.ErrTicketInvalid) {
			t.Fatalf("%s: ParseTicket error = %v, want ErrTicketInvalid", name, err)
		}
		assertNoMarker(t, name+": error", err.Error())
	}

	// The redacted forms never carry the key or the bytes either.
	if got, want := tk.String(), fmt.Sprintf("tenant=acme sha256=%s… size=%d", tk.SHA256[:12], len(payload)); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("claimed", "ticket", tk)
	assertNoMarker(t, "log line", logged.String())
	if !strings.Contains(logged.String(), "ticket.tenant=acme") || !strings.Contains(logged.String(), "ticket.inline=true") {
		t.Fatalf("log line lacks the ticket's identity: %s", logged.String())
	}

	off := offloadedTicket()
	logged.Reset()
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("claimed", "ticket", off)
	if strings.Contains(logged.String(), off.Key) || strings.Contains(logged.String(), off.SHA256) {
		t.Fatalf("log line contains the key or full digest: %s", logged.String())
	}
	if !strings.Contains(logged.String(), `"sha256":"`+off.SHA256[:12]+`"`) {
		t.Fatalf("log line lacks the digest prefix: %s", logged.String())
	}
}

// TestTicketWorstCaseFitsBudget builds the largest ticket the input limits
// allow for an offloaded payload and checks it fits MaxTicketBytes.
func TestTicketWorstCaseFitsBudget(t *testing.T) {
	t.Parallel()

	tenant := strings.Repeat("t", claimcheck.MaxTenantLen)
	store := strings.Repeat("s", claimcheck.MaxStoreNameLen)
	name := strings.Repeat("n", claimcheck.MaxNameLen)
	version := strings.Repeat("v", claimcheck.MaxVersionLen)
	ct := "application/" + strings.Repeat("x", claimcheck.MaxContentTypeLen-len("application/"))
	if len(ct) != claimcheck.MaxContentTypeLen {
		t.Fatalf("content type is %d bytes", len(ct))
	}
	worst := &claimcheck.Ticket{
		Version:     claimcheck.TicketVersion,
		Tenant:      tenant,
		Store:       store,
		Key:         claimcheck.PrefixPayloads + tenant + "/named/" + name + "@" + version,
		SHA256:      strings.Repeat("f", 64),
		Size:        math.MaxInt64,
		ContentType: ct,
		Created:     time.Date(9999, 12, 31, 23, 59, 59, 123456789, time.UTC),
		// A signature: base64url of a 32-byte HMAC.
		Sig: strings.Repeat("S", 43),
	}

	for _, tc := range []struct {
		name string
		loc  *time.Location
	}{
		{"UTC", time.UTC},
		// Created is UTC when CheckIn writes it, but a ticket built by hand
		// may carry an offset, which is 5 bytes longer than "Z".
		{"Offset", time.FixedZone("", -(9*3600 + 30*60))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := *worst
			tk.Created = worst.Created.In(tc.loc)
			b, err := tk.Marshal()
			if err != nil {
				t.Fatalf("Marshal(worst case): %v", err)
			}
			t.Logf("worst-case offloaded ticket: %d of %d bytes", len(b), claimcheck.MaxTicketBytes)
			if len(b) > claimcheck.MaxTicketBytes {
				t.Fatalf("worst-case ticket is %d bytes, budget %d:\n%s", len(b), claimcheck.MaxTicketBytes, b)
			}
			got, err := claimcheck.ParseTicket(b)
			if err != nil {
				t.Fatalf("ParseTicket(worst case): %v", err)
			}
			assertTicketsEqual(t, got, &tk)
		})
	}

	// Each limit is a real limit: one byte more does not validate.
	for name, f := range map[string]func(tk *claimcheck.Ticket){
		"Tenant": func(tk *claimcheck.Ticket) {
			tk.Tenant += "t"
			tk.Key = claimcheck.PrefixPayloads + tk.Tenant + "/named/" + name + "@" + version
		},
		"Store":       func(tk *claimcheck.Ticket) { tk.Store += "s" },
		"Key":         func(tk *claimcheck.Ticket) { tk.Key += "v" },
		"ContentType": func(tk *claimcheck.Ticket) { tk.ContentType += "x" },
	} {
		tk := *worst
		f(&tk)
		if _, err := tk.Marshal(); !errorsIs(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("%s one byte over its limit: Marshal error = %v, want ErrTicketInvalid", name, err)
		}
	}
}

// TestInlineTicketSizeBound checks that InlineTicketSize is an upper bound
// for real inline tickets with the longest tenant and content type.
func TestInlineTicketSizeBound(t *testing.T) {
	t.Parallel()

	tenant := strings.Repeat("t", claimcheck.MaxTenantLen)
	ct := "application/" + strings.Repeat("x", claimcheck.MaxContentTypeLen-len("application/"))
	for _, threshold := range []int64{1, 2, 3, 4, 1000, claimcheck.DefaultInlineThreshold} {
		payload := randomBytes(int(threshold), uint64(threshold))
		tk := inlineTicket(payload)
		tk.Tenant = tenant
		tk.ContentType = ct
		tk.Size = int64(len(payload))
		tk.Created = time.Date(9999, 12, 31, 23, 59, 59, 123456789, time.FixedZone("", -3600))
		b := mustMarshal(t, tk)
		if bound := claimcheck.InlineTicketSize(threshold); int64(len(b)) > bound {
			t.Errorf("inline ticket for %d bytes is %d bytes, InlineTicketSize says at most %d", threshold, len(b), bound)
		}
	}
	// Sealed: the ciphertext's overhead, a wrapped data key filling its
	// allowance, the longest key id and a signature still fit.
	for _, threshold := range []int64{1, 1000, claimcheck.DefaultInlineThreshold} {
		tk := inlineTicket(nil)
		tk.Tenant = tenant
		tk.ContentType = ct
		tk.Size = threshold
		tk.SHA256 = strings.Repeat("f", 64)
		tk.Inline = make([]byte, threshold+256)
		tk.DEK = strings.Repeat("D", 1024-len(`,"dek":""`))
		tk.KID = strings.Repeat("k", claimcheck.MaxKeyIDLen)
		tk.Sig = strings.Repeat("S", 43)
		tk.Created = time.Date(9999, 12, 31, 23, 59, 59, 123456789, time.FixedZone("", -3600))
		b := mustMarshal(t, tk)
		if bound := claimcheck.InlineTicketSize(threshold); int64(len(b)) > bound {
			t.Errorf("sealed inline ticket for %d bytes with a %d-byte key id is %d bytes, InlineTicketSize says at most %d", threshold, claimcheck.MaxKeyIDLen, len(b), bound)
		} else {
			t.Logf("sealed inline ticket for %d bytes, longest key id: %d of %d bytes", threshold, len(b), bound)
		}
	}
	if got := claimcheck.InlineTicketSize(-1); got != claimcheck.MaxTicketBytes {
		t.Errorf("InlineTicketSize(-1) = %d, want %d", got, claimcheck.MaxTicketBytes)
	}
	// 512 + base64 of (64 KiB + 256 B of AEAD overhead) + `,"inline":""` + 1 KiB for a wrapped data key.
	if got, want := claimcheck.InlineTicketSize(claimcheck.DefaultInlineThreshold), int64(512+(65536+256+2)/3*4+12+1024); got != want {
		t.Errorf("InlineTicketSize(64 KiB) = %d, want %d", got, want)
	}
}

func TestTicketMarshalRejectsInvalid(t *testing.T) {
	t.Parallel()

	for name, f := range map[string]func(tk *claimcheck.Ticket){
		"VersionZero":      func(tk *claimcheck.Ticket) { tk.Version = 0 },
		"VersionTwo":       func(tk *claimcheck.Ticket) { tk.Version = 2 },
		"EmptyTenant":      func(tk *claimcheck.Ticket) { tk.Tenant = "" },
		"TenantLeadDash":   func(tk *claimcheck.Ticket) { tk.Tenant = "-acme" },
		"UppercaseDigest":  func(tk *claimcheck.Ticket) { tk.SHA256 = strings.ToUpper(tk.SHA256) },
		"ShortDigest":      func(tk *claimcheck.Ticket) { tk.SHA256 = tk.SHA256[:63] },
		"NegativeSize":     func(tk *claimcheck.Ticket) { tk.Size = -1 },
		"ZeroCreated":      func(tk *claimcheck.Ticket) { tk.Created = time.Time{} },
		"BadContentType":   func(tk *claimcheck.Ticket) { tk.ContentType = "not a type" },
		"NoStore":          func(tk *claimcheck.Ticket) { tk.Store = "" },
		"BadStore":         func(tk *claimcheck.Ticket) { tk.Store = "Default" },
		"KeyOtherTenant":   func(tk *claimcheck.Ticket) { tk.Key = "payloads/beta/2c/" + helloSHA },
		"KeyTenantPrefix":  func(tk *claimcheck.Ticket) { tk.Key = "payloads/acmex/2c/" + helloSHA },
		"KeyNoRole":        func(tk *claimcheck.Ticket) { tk.Key = "acme/2c/" + helloSHA },
		"KeyTraversal":     func(tk *claimcheck.Ticket) { tk.Key = "payloads/acme/../beta/2c/" + helloSHA },
		"KeyDoubleSlash":   func(tk *claimcheck.Ticket) { tk.Key = "payloads/acme//x" },
		"KeyEmptyRest":     func(tk *claimcheck.Ticket) { tk.Key = "payloads/acme/" },
		"KeyBadChar":       func(tk *claimcheck.Ticket) { tk.Key = "payloads/acme/a b" },
		"KeyBadVersion":    func(tk *claimcheck.Ticket) { tk.Key = "payloads/acme/named/x@a/b" },
		"KeyAndInline":     func(tk *claimcheck.Ticket) { tk.Inline = []byte("hello") },
		"InlineSizeWrong":  func(tk *claimcheck.Ticket) { tk.Key, tk.Store, tk.Inline = "", "", []byte("hell") },
		"InlineNamesStore": func(tk *claimcheck.Ticket) { tk.Key, tk.Inline = "", []byte("hello") },
	} {
		tk := offloadedTicket()
		f(tk)
		b, err := tk.Marshal()
		if b != nil || !errorsIs(err, claimcheck.ErrTicketInvalid) {
			t.Errorf("%s: Marshal = %q, %v; want ErrTicketInvalid", name, b, err)
		}
	}

	// Valid variants, for contrast.
	for name, f := range map[string]func(tk *claimcheck.Ticket){
		"ResultsKey": func(tk *claimcheck.Ticket) { tk.Key = "results/acme/2c/" + helloSHA },
		"NamedKey":   func(tk *claimcheck.Ticket) { tk.Key = "payloads/acme/named/orders/po-1@v2" },
		"NoType":     func(tk *claimcheck.Ticket) { tk.ContentType = "" },
		"TypeParams": func(tk *claimcheck.Ticket) { tk.ContentType = "text/plain; charset=utf-8" },
	} {
		tk := offloadedTicket()
		f(tk)
		if _, err := tk.Marshal(); err != nil {
			t.Errorf("%s: Marshal: %v", name, err)
		}
	}
}

// ParseTicket's one-pass decode (go-json-experiment/json/v1) reads a
// ticket as encoding/json does, and DecodedTicket.Check (a worker's path)
// checks it as ParseTicket does: a ticket one accepts, the other accepts
// with the same fields, and what one refuses, the other refuses. The
// seeds are where the two decoders could part:
// keys matched without regard to case or escaped, a key given twice,
// invalid UTF-8, base64 broken by an escaped newline, nulls.
func FuzzParseTicketDecodesAsEncodingJSON(f *testing.F) {
	for _, tk := range []*claimcheck.Ticket{inlineTicket([]byte("hello")), offloadedTicket()} {
		b, err := tk.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		`{"v":1,"TENANT":"acme","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8="}`,
		`{"v":1,"tenant":"acme","Tenant":"other","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8="}`,
		`{"v":1,"\u0074enant":"acme","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8="}`,
		"{\"v\":1,\"tenant\":\"ac\xffme\",\"sha256\":\"" + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8="}`,
		`{"v":1,"tenant":"acme","sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24Z","inline":"aGVs\nbG8="}`,
		`{"v":1,"tenant":null,"sha256":"` + helloSHA + `","size":5,"created":"2026-11-29T21:34:24+01:00","inline":null,"key":"k","store":"s"}`,
		`{"v":1,"v":1,"tenant":"acme","sha256":"` + helloSHA + `","size":5.0,"created":"2026-11-29T21:34:24Z","inline":"aGVsbG8"}`,
	} {
		f.Add([]byte(s))
	}
	// Both ways: a worker decodes a job's ticket with encoding/json as a
	// DecodedTicket (pipeline's WorkArgs) and checks it with Check; what
	// one refuses, the other must refuse.
	f.Fuzz(func(t *testing.T, b []byte) {
		got, perr := claimcheck.ParseTicket(b)
		var d claimcheck.DecodedTicket
		var decoded *claimcheck.Ticket
		err := json.Unmarshal(b, &d)
		if err == nil {
			decoded, err = d.Check()
		}
		switch {
		case perr == nil && err != nil:
			t.Fatalf("ParseTicket accepted %q, encoding/json and Check did not: %v", b, err)
		case perr != nil && err == nil:
			t.Fatalf("encoding/json and Check accepted %q, ParseTicket did not: %v", b, perr)
		case perr == nil:
			assertTicketsEqual(t, got, decoded)
		}
	})
}
