package claimcheck_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gocloud.dev/secrets"
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// newKeeperWithID is newKeeper with its key's id (claimcheck.LocalKeyID).
func newKeeperWithID(t *testing.T) (*secrets.Keeper, string) {
	t.Helper()
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	k := localsecrets.NewKeeper(key)
	t.Cleanup(func() { _ = k.Close() })
	return k, claimcheck.LocalKeyID(key[:])
}

// TestInlineTicketCarriesKeyID: an inline sealed ticket names the key
// that wrapped its data key ("kid"); a worker holding another key fails
// before unwrapping with a keeper error (transient) naming both ids, and
// the right worker reads it. An offloaded ticket carries no kid (its
// object's metadata does).
func TestInlineTicketCarriesKeyID(t *testing.T) {
	t.Parallel()
	k, id := newKeeperWithID(t)
	b := setup(t, &claimcheck.Options{Keeper: k, KeeperID: id})
	small := []byte("small and inline " + payloadMarker)
	itk := b.checkIn(t, "acme", small, nil)
	if !itk.IsInline() || itk.DEK == "" || itk.KID != id {
		t.Fatalf("inline ticket: inline %v, dek %v, kid %q; want kid %s", itk.IsInline(), itk.DEK != "", itk.KID, id)
	}
	enc, err := itk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(enc, &fields); err != nil || fields["kid"] != id {
		t.Fatalf("encoded ticket: kid %v (%v), want %s", fields["kid"], err, id)
	}
	if parsed, err := claimcheck.ParseTicket(enc); err != nil || parsed.KID != id {
		t.Fatalf("ParseTicket: kid %v, %v", parsed, err)
	}
	otk := b.checkIn(t, "acme", corpusPDF(t, "bash.pdf"), nil)
	if otk.KID != "" {
		t.Errorf("offloaded ticket carries kid %q", otk.KID)
	}

	other, otherID := newKeeperWithID(t)
	worker := open(t, "file://"+b.root, &claimcheck.Options{Keeper: other, KeeperID: otherID})
	_, err = readAllOpen(worker.ctx, worker.store, itk)
	if !errors.Is(err, claimcheck.ErrKeeper) || claimcheck.IsPermanent(err) || !strings.Contains(err.Error(), id) || !strings.Contains(err.Error(), otherID) {
		t.Fatalf("worker with key %s: %v; want a transient keeper error naming %s and %s", otherID, err, id, otherID)
	}
	t.Logf("worker with another key: %v", err)
	if got, err := readAllOpen(b.ctx, b.store, itk); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("right keeper: %q, %v", got, err)
	}
}

// TestInlineTicketWithoutKeyID: a ticket sealed before "kid" was written
// (none in it) still opens with the right key, and a worker holding
// another key still fails with a keeper error naming its own id.
func TestInlineTicketWithoutKeyID(t *testing.T) {
	t.Parallel()
	k, id := newKeeperWithID(t)
	b := setup(t, &claimcheck.Options{Keeper: k, KeeperID: id})
	small := []byte("small and inline " + payloadMarker)
	itk := b.checkIn(t, "acme", small, nil)
	old := *itk
	old.KID = ""
	enc, err := old.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc, []byte(`"kid"`)) {
		t.Fatalf("ticket without a key id encodes one: %s", enc)
	}
	parsed, err := claimcheck.ParseTicket(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAllOpen(b.ctx, b.store, parsed); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("old ticket, right keeper: %q, %v", got, err)
	}
	other, otherID := newKeeperWithID(t)
	worker := open(t, "file://"+b.root, &claimcheck.Options{Keeper: other, KeeperID: otherID})
	_, err = readAllOpen(worker.ctx, worker.store, parsed)
	if !errors.Is(err, claimcheck.ErrKeeper) || !strings.Contains(err.Error(), otherID) {
		t.Fatalf("old ticket, worker with key %s: %v; want a keeper error naming it", otherID, err)
	}
}

// TestTicketKeyIDOnlyBesideDEK: "kid" without "dek", on an offloaded
// ticket, or longer than MaxKeyIDLen does not validate.
func TestTicketKeyIDOnlyBesideDEK(t *testing.T) {
	t.Parallel()
	plain := inlineTicket([]byte("plain"))
	plain.KID = "local-0123456789abcdef"
	if _, err := plain.Marshal(); !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Errorf("kid on a plain inline ticket: %v, want ErrTicketInvalid", err)
	}
	off := &claimcheck.Ticket{Version: claimcheck.TicketVersion, Tenant: "acme", Store: "default",
		Key: claimcheck.PrefixPayloads + "acme/ab/" + strings.Repeat("a", 64), SHA256: strings.Repeat("a", 64), Size: 1, Created: testCreated, KID: "local-0123456789abcdef"}
	if _, err := off.Marshal(); !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Errorf("kid on an offloaded ticket: %v, want ErrTicketInvalid", err)
	}
	sealed := inlineTicket([]byte("x"))
	sealed.Inline, sealed.DEK = bytes.Repeat([]byte{1}, 40), "d2Vk"
	sealed.KID = strings.Repeat("k", claimcheck.MaxKeyIDLen)
	if _, err := sealed.Marshal(); err != nil {
		t.Errorf("kid of %d bytes: %v", claimcheck.MaxKeyIDLen, err)
	}
	sealed.KID += "k"
	if _, err := sealed.Marshal(); !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Errorf("kid of %d bytes: %v, want ErrTicketInvalid", len(sealed.KID), err)
	}
}
