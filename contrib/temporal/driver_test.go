package temporal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"gocloud.dev/secrets/localsecrets"
	"google.golang.org/protobuf/proto"

	cctemporal "github.com/claimcheck/claimcheck/contrib/temporal"
)

// openFileStore opens a claimcheck file:// store in a fresh directory.
func openFileStore(t *testing.T, opts *claimcheck.Options) *claimcheck.Store {
	t.Helper()
	if opts == nil {
		opts = &claimcheck.Options{}
	}
	opts.SpoolDir = t.TempDir()
	s, err := claimcheck.OpenStore(t.Context(), "file://"+t.TempDir(), opts)
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newDriver(t *testing.T, s *claimcheck.Store) *cctemporal.Driver {
	t.Helper()
	d, err := cctemporal.New(s, cctemporal.Options{Tenant: "temporal"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// bigPayload is a payload as the SDK's JSON converter makes one, with n
// random bytes of data.
func bigPayload(t testing.TB, n int) *commonpb.Payload {
	t.Helper()
	data := make([]byte, n)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	return &commonpb.Payload{
		Metadata: map[string][]byte{"encoding": []byte("binary/plain"), "x-extra": []byte("kept")},
		Data:     data,
	}
}

func storeCtx(t *testing.T) converter.StorageDriverStoreContext {
	return converter.StorageDriverStoreContext{Context: t.Context()}
}

func retrieveCtx(t *testing.T) converter.StorageDriverRetrieveContext {
	return converter.StorageDriverRetrieveContext{Context: t.Context()}
}

// roundTrip stores payloads, checks each claim is a small offloaded ticket,
// retrieves them and checks they are equal to the originals.
func roundTrip(t *testing.T, d *cctemporal.Driver, payloads ...*commonpb.Payload) []converter.StorageDriverClaim {
	t.Helper()
	claims, err := d.Store(storeCtx(t), payloads)
	if err != nil {
		t.Fatalf("Store: %v", err)
	}
	if len(claims) != len(payloads) {
		t.Fatalf("Store returned %d claims for %d payloads", len(claims), len(payloads))
	}
	for i, c := range claims {
		if n := len(c.ClaimData[cctemporal.ClaimKey]); n == 0 || n > claimcheck.MaxTicketBytes {
			t.Errorf("claim %d: ticket of %d bytes, want 1..%d", i, n, claimcheck.MaxTicketBytes)
		}
		tk, err := cctemporal.ParseClaim(c)
		if err != nil {
			t.Fatalf("ParseClaim(claim %d): %v", i, err)
		}
		if want := int64(proto.Size(payloads[i])); tk.Size != want {
			t.Errorf("claim %d: ticket size %d, want the payload's encoded size %d", i, tk.Size, want)
		}
	}
	got, err := d.Retrieve(retrieveCtx(t), claims)
	if err != nil {
		t.Fatalf("Retrieve: %v", err)
	}
	if len(got) != len(payloads) {
		t.Fatalf("Retrieve returned %d payloads for %d claims", len(got), len(claims))
	}
	for i := range payloads {
		if !proto.Equal(got[i], payloads[i]) {
			t.Errorf("payload %d: retrieved payload differs from the stored one (%d vs %d bytes of data)", i, len(got[i].GetData()), len(payloads[i].GetData()))
		}
	}
	return claims
}

func TestStoreRetrieveFileStore(t *testing.T) {
	d := newDriver(t, openFileStore(t, nil))
	small := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"hi"`)}
	empty := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/null")}}
	big := bigPayload(t, 5<<20)
	claims := roundTrip(t, d, big, small, empty, big)
	// Content addressing: the same payload twice is one object.
	if claims[0].ClaimData[cctemporal.ClaimKey] == "" {
		t.Fatal("empty claim")
	}
	t0, _ := cctemporal.ParseClaim(claims[0])
	t3, _ := cctemporal.ParseClaim(claims[3])
	if t0.Key != t3.Key {
		t.Errorf("one payload stored twice under two keys")
	}
}

func TestStoreRetrieveEncrypted(t *testing.T) {
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	s := openFileStore(t, &claimcheck.Options{Keeper: localsecrets.NewKeeper(key), Secret: bytes.Repeat([]byte("s"), 32), SignTickets: true})
	d := newDriver(t, s)
	p := bigPayload(t, 1<<20)
	claims := roundTrip(t, d, p)
	// The object holds ciphertext: the data does not appear in it.
	tk, _ := cctemporal.ParseClaim(claims[0])
	raw, err := s.Bucket().ReadAll(t.Context(), tk.Key)
	if err != nil {
		t.Fatalf("read object: %v", err)
	}
	if bytes.Contains(raw, p.Data[:64]) {
		t.Errorf("the sealed object holds the payload's plaintext")
	}
	// An altered claim is refused before anything is fetched.
	forged := strings.Replace(claims[0].ClaimData[cctemporal.ClaimKey], `"size":`, `"size":1`, 1)
	_, err = d.Retrieve(retrieveCtx(t), []converter.StorageDriverClaim{{ClaimData: map[string]string{cctemporal.ClaimKey: forged}}})
	if !errors.Is(err, claimcheck.ErrTicketForbidden) {
		t.Errorf("Retrieve(altered signed claim) = %v, want ErrTicketForbidden", err)
	}
}

func TestStoreRetrieveS3(t *testing.T) {
	b := s3test.New(t, "temporal")
	s, err := claimcheck.OpenStore(t.Context(), b.URL, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatalf("OpenStore(S3): %v", err)
	}
	defer s.Close()
	d := newDriver(t, s)
	roundTrip(t, d, bigPayload(t, 5<<20), bigPayload(t, 300<<10))
}

func TestRetrieveCorrupt(t *testing.T) {
	s := openFileStore(t, nil)
	d := newDriver(t, s)
	claims := roundTrip(t, d, bigPayload(t, 300<<10))
	tk, _ := cctemporal.ParseClaim(claims[0])
	raw, err := s.Bucket().ReadAll(t.Context(), tk.Key)
	if err != nil {
		t.Fatalf("read object: %v", err)
	}
	raw[len(raw)/2] ^= 1 // same size, one bit flipped
	if err := s.Bucket().WriteAll(t.Context(), tk.Key, raw, nil); err != nil {
		t.Fatalf("overwrite object: %v", err)
	}
	_, err = d.Retrieve(retrieveCtx(t), claims)
	if !errors.Is(err, claimcheck.ErrPayloadCorrupt) || !claimcheck.IsPermanent(err) {
		t.Fatalf("Retrieve(corrupt object) = %v, want permanent ErrPayloadCorrupt", err)
	}
	// Shorter than the ticket says.
	if err := s.Bucket().WriteAll(t.Context(), tk.Key, raw[:len(raw)-1], nil); err != nil {
		t.Fatalf("overwrite object: %v", err)
	}
	if _, err = d.Retrieve(retrieveCtx(t), claims); !errors.Is(err, claimcheck.ErrPayloadCorrupt) {
		t.Fatalf("Retrieve(truncated object) = %v, want ErrPayloadCorrupt", err)
	}
	if strings.Contains(err.Error(), tk.Key) {
		t.Errorf("error names the full object key: %v", err)
	}
}

func TestRetrieveMissing(t *testing.T) {
	s := openFileStore(t, nil)
	d := newDriver(t, s)
	claims := roundTrip(t, d, bigPayload(t, 300<<10), bigPayload(t, 300<<10))
	tk, _ := cctemporal.ParseClaim(claims[1])
	if err := s.Bucket().Delete(t.Context(), tk.Key); err != nil {
		t.Fatalf("delete object: %v", err)
	}
	_, err := d.Retrieve(retrieveCtx(t), claims)
	if !errors.Is(err, claimcheck.ErrPayloadMissing) || !claimcheck.IsPermanent(err) {
		t.Fatalf("Retrieve(missing object) = %v, want permanent ErrPayloadMissing", err)
	}
	if !strings.Contains(err.Error(), "payload 2 of 2") {
		t.Errorf("error does not say which payload: %v", err)
	}
}

func TestRetrieveBadClaim(t *testing.T) {
	d := newDriver(t, openFileStore(t, nil))
	for name, c := range map[string]map[string]string{
		"nil":        nil,
		"other key":  {"bucket": "b", "key": "k"},
		"extra key":  {cctemporal.ClaimKey: `{}`, "x": "y"},
		"not JSON":   {cctemporal.ClaimKey: "not json"},
		"truncated":  {cctemporal.ClaimKey: `{"v":1,"tenant":"temporal","store":"default","key":"payloads/tem`},
		"inline":     {cctemporal.ClaimKey: `{"v":1,"tenant":"temporal","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5,"created":"2026-12-01T00:00:00Z","inline":"aGVsbG8="}`},
		"bad tenant": {cctemporal.ClaimKey: `{"v":1,"tenant":"A/B","store":"default","key":"payloads/A/B","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5,"created":"2026-12-01T00:00:00Z"}`},
	} {
		_, err := d.Retrieve(retrieveCtx(t), []converter.StorageDriverClaim{{ClaimData: c}})
		if !errors.Is(err, claimcheck.ErrTicketInvalid) || !claimcheck.IsPermanent(err) {
			t.Errorf("%s: Retrieve = %v, want permanent ErrTicketInvalid", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestRetrieveTooLarge(t *testing.T) {
	s := openFileStore(t, nil)
	claims := roundTrip(t, newDriver(t, s), bigPayload(t, 300<<10))
	d, err := cctemporal.New(s, cctemporal.Options{Tenant: "temporal", MaxPayloadSize: 100 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Retrieve(retrieveCtx(t), claims); !errors.Is(err, claimcheck.ErrPayloadTooLarge) {
		t.Fatalf("Retrieve past MaxPayloadSize = %v, want ErrPayloadTooLarge", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	s := openFileStore(t, nil)
	for name, o := range map[string]cctemporal.Options{
		"no tenant":    {},
		"bad tenant":   {Tenant: "Acme/1"},
		"bad name":     {Tenant: "t", Name: "my driver"},
		"negative max": {Tenant: "t", MaxPayloadSize: -1},
	} {
		if _, err := cctemporal.New(s, o); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("%s: New = %v, want ErrConfig", name, err)
		}
	}
	if _, err := cctemporal.New(nil, cctemporal.Options{Tenant: "t"}); !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("New(nil store) = %v, want ErrConfig", err)
	}
}

// The store's failures are transient: a cancelled context is ErrUnavailable,
// never missing.
func TestStoreCancelled(t *testing.T) {
	d := newDriver(t, openFileStore(t, nil))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := d.Store(converter.StorageDriverStoreContext{Context: ctx}, []*commonpb.Payload{bigPayload(t, 300<<10)})
	if err == nil || claimcheck.IsPermanent(err) {
		t.Fatalf("Store(cancelled) = %v, want a transient error", err)
	}
}

func FuzzParseClaim(f *testing.F) {
	f.Add(`{"v":1,"tenant":"temporal","store":"default","key":"payloads/temporal/2c/2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","size":5,"type":"application/x-protobuf","created":"2026-12-01T00:00:00Z"}`, "")
	f.Add(`{"v":1}`, "x")
	f.Add(``, "")
	f.Fuzz(func(t *testing.T, ticket, extra string) {
		data := map[string]string{cctemporal.ClaimKey: ticket}
		if extra != "" {
			data[extra] = ticket
		}
		tk, err := cctemporal.ParseClaim(converter.StorageDriverClaim{ClaimData: data})
		if err != nil {
			if !errors.Is(err, claimcheck.ErrTicketInvalid) {
				t.Fatalf("ParseClaim error %v does not wrap ErrTicketInvalid", err)
			}
			return
		}
		if tk.IsInline() || tk.Key == "" {
			t.Fatalf("ParseClaim accepted an inline ticket")
		}
		// What parses re-encodes to a ticket that parses to the same.
		b, err := tk.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed ticket: %v", err)
		}
		tk2, err := cctemporal.ParseClaim(converter.StorageDriverClaim{ClaimData: map[string]string{cctemporal.ClaimKey: string(b)}})
		if err != nil || tk2.Key != tk.Key || tk2.SHA256 != tk.SHA256 || tk2.Size != tk.Size {
			t.Fatalf("re-parse: %v, %+v vs %+v", err, tk2, tk)
		}
	})
}
