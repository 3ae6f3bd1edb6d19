package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"gocloud.dev/secrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv/localkms"
)

// kmsOptions opens gocloud's awskms keeper for keyID on local-kms and
// returns store options with it and its key id (claimcheck.KeeperID of its
// URL, "awskms:KEYID"), as the command opens --keeper.
func kmsOptions(t *testing.T, l *localkms.KMS, keyID string) *claimcheck.Options {
	t.Helper()
	u := l.KeeperURL(keyID)
	k, err := secrets.OpenKeeper(t.Context(), u)
	if err != nil {
		t.Fatalf("OpenKeeper: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	id, err := claimcheck.KeeperID(u)
	if err != nil {
		t.Fatal(err)
	}
	return &claimcheck.Options{Keeper: k, KeeperID: id}
}

// assertKeeperFailed: err is keeper-failed, transient, never missing or
// corrupt, and names keyID (when keyID is not "").
func assertKeeperFailed(t *testing.T, what string, err error, keyID string) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("%s: succeeded", what)
	case !errors.Is(err, claimcheck.ErrKeeper) || claimcheck.Reason(err) != claimcheck.ReasonKeeper || claimcheck.IsPermanent(err):
		t.Fatalf("%s: %v (Reason %q, IsPermanent %v); want transient %s", what, err, claimcheck.Reason(err), claimcheck.IsPermanent(err), claimcheck.ReasonKeeper)
	case errors.Is(err, claimcheck.ErrPayloadMissing) || errors.Is(err, claimcheck.ErrPayloadCorrupt):
		t.Fatalf("%s: %v is also missing or corrupt", what, err)
	case keyID != "" && !strings.Contains(err.Error(), keyID):
		t.Fatalf("%s: %q does not name the key id %s", what, err, keyID)
	}
	t.Logf("%s: %v", what, err)
}

// TestKeeperLocalKMS: payloads sealed under a real AWS KMS key (local-kms)
// round-trip; with the key disabled, claims and check-ins are keeper-failed
// (retried, naming the key id, offloaded and inline alike), nothing is
// stored, and once the key is enabled again the same tickets claim.
func TestKeeperLocalKMS(t *testing.T) {
	l := localkms.New(t)
	t.Parallel()
	keyID := l.CreateKey(t)
	b := setup(t, kmsOptions(t, l, keyID))
	data := corpusPDF(t, "bash.pdf")
	small := []byte("inline " + payloadMarker)
	tk := b.checkIn(t, "acme", data, nil)
	itk := b.checkIn(t, "acme", small, nil)
	if tk.IsInline() || !itk.IsInline() {
		t.Fatalf("placement: %v %v", tk.IsInline(), itk.IsInline())
	}
	for _, c := range []struct {
		tk   *claimcheck.Ticket
		want []byte
	}{{tk, data}, {itk, small}} {
		if got := b.claimBytes(t, c.tk); !bytes.Equal(got, c.want) {
			t.Fatalf("claim: %d bytes, want %d", len(got), len(c.want))
		}
	}
	// The object holds ciphertext, not the payload.
	if info, err := b.store.Stat(b.ctx, tk); err != nil || !info.Encrypted {
		t.Fatalf("Stat: %+v, %v; want an encrypted object", info, err)
	}
	// A tenant's inline data key, and each wrapped key opened, serve for up
	// to a minute (docs/stores.md, "Inline data keys"): what is checked
	// and claimed with the key disabled below is another tenant's, never
	// opened by this store.
	itk2 := b.checkIn(t, "globex", small, nil)
	files := b.files(t)

	l.Disable(t, keyID)
	for name, c := range map[string]*claimcheck.Ticket{"offloaded": tk, "inline": itk2} {
		_, err := readAllOpen(b.ctx, b.store, c)
		// Decrypt names no key (the ciphertext does), and local-kms's
		// answer for a disabled key names none either (AccessDeniedException
		// "... or you are not allowed to access"; AWS answers
		// DisabledException naming the key's ARN): the claim names the
		// keeper's key id (Options.KeeperID).
		assertKeeperFailed(t, "claim "+name+" with the key disabled", err, "awskms:"+keyID)
	}
	for name, d := range map[string][]byte{"offloaded": randomBytes(100_000, 9), "inline": []byte("another " + payloadMarker)} {
		tk, err := b.store.CheckIn(b.ctx, "initech", bytes.NewReader(d), nil)
		if tk != nil {
			t.Fatalf("check-in %s with the key disabled gave a ticket", name)
		}
		assertKeeperFailed(t, "check in "+name+" with the key disabled", err, "awskms:"+keyID)
	}
	if got := b.files(t); !slices.Equal(got, files) {
		t.Fatalf("files after refused check-ins = %q, want %q", got, files)
	}

	l.Enable(t, keyID)
	if got := b.claimBytes(t, tk); !bytes.Equal(got, data) {
		t.Fatal("claim after the key is enabled again differs")
	}
	if got := b.claimBytes(t, itk2); !bytes.Equal(got, small) {
		t.Fatal("inline claim after the key is enabled again differs")
	}
}

// TestKeeperLocalKMSUnusableKeys: keys the caller cannot encrypt or decrypt
// with — one pending deletion, one for signing only, one that does not
// exist — are keeper-failed, naming the key, with nothing stored.
// (local-kms has no IAM: a key policy refusing the caller, AccessDenied,
// is covered by TestSealKeeperDenied's stub.)
func TestKeeperLocalKMSUnusableKeys(t *testing.T) {
	l := localkms.New(t)
	t.Parallel()
	ctx := t.Context()
	pending := l.CreateKey(t)
	if _, err := l.Client.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: aws.String(pending), PendingWindowInDays: aws.Int32(7)}); err != nil {
		t.Fatal(err)
	}
	sign, err := l.Client.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecEccNistP256, KeyUsage: kmstypes.KeyUsageTypeSignVerify})
	if err != nil {
		t.Fatal(err)
	}
	for name, keyID := range map[string]string{
		"pending deletion": pending,
		"signing key":      aws.ToString(sign.KeyMetadata.KeyId),
		"no such key":      "00000000-0000-4000-8000-000000000000",
	} {
		b := setup(t, kmsOptions(t, l, keyID))
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		tk, err := b.store.CheckIn(cctx, "acme", bytes.NewReader(randomBytes(100_000, 3)), nil)
		cancel()
		if tk != nil {
			t.Fatalf("%s: a ticket", name)
		}
		assertKeeperFailed(t, name, err, "awskms:"+keyID)
		if files := b.files(t); len(files) != 0 {
			t.Fatalf("%s: files stored: %q", name, files)
		}
	}
}
