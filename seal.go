package claimcheck

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/streamingaead"
	"github.com/tink-crypto/tink-go/v2/tink"
	"gocloud.dev/secrets"
)

// Envelope encryption (sealing). Each payload gets a fresh data key: a Tink
// streaming-AEAD keyset (AES256-GCM-HKDF, 1 MiB segments) that encrypts the
// bytes as they stream. The keyset is wrapped by a key-encryption key held
// by a gocloud.dev/secrets Keeper (a local key file, AWS KMS, GCP KMS, Azure
// Key Vault), which neither the broker operator nor the store holds. The
// associated data binds each ciphertext to its tenant and object key, so an
// object copied under another key or tenant fails to decrypt.
//
// The wrapped data key travels in the object's metadata (offloaded payloads)
// or in the ticket's "dek" field (inline payloads, whose ticket is not held
// to the 512-byte budget). The ticket's sha256 and size always describe the
// plaintext and are verified after decryption.

// metaDEK is the object metadata entry holding the wrapped data key.
const metaDEK = "claimcheck-dek"

// sealer wraps and unwraps data keys with a keeper, each call bounded by
// timeout (Options.KeeperTimeout).
type sealer struct {
	keeper  *secrets.Keeper
	timeout time.Duration
}

// associatedData binds a ciphertext to its tenant and key (empty key for an
// inline payload).
func associatedData(tenant, key string) []byte {
	return []byte("claimcheck/seal/v1\x00" + tenant + "\x00" + key)
}

// newDataKey makes a fresh streaming AEAD and its wrapped keyset (base64).
func (s sealer) newDataKey(ctx context.Context, ad []byte) (tink.StreamingAEAD, string, error) {
	h, err := keyset.NewHandle(streamingaead.AES256GCMHKDF1MBKeyTemplate())
	if err != nil {
		return nil, "", fmt.Errorf("claimcheck: seal: new data key: %w: %w", ErrUnavailable, err)
	}
	var buf bytes.Buffer
	kek := &keeperAEAD{k: s.keeper, timeout: s.timeout}
	if err := h.WriteWithContext(ctx, keyset.NewBinaryWriter(&buf), kek, ad); err != nil {
		if kek.err != nil {
			err = kek.err // Tink formats the keeper's error with %v: keep its code
		}
		return nil, "", keeperError("wrap data key", err)
	}
	p, err := streamingaead.New(h)
	if err != nil {
		return nil, "", fmt.Errorf("claimcheck: seal: %w: %w", ErrUnavailable, err)
	}
	return p, base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// openDataKey unwraps a data key.
func (s sealer) openDataKey(ctx context.Context, wrapped string, ad []byte) (tink.StreamingAEAD, error) {
	raw, err := base64.StdEncoding.DecodeString(wrapped)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: unseal: wrapped data key is not base64: %w", ErrPayloadCorrupt)
	}
	kek := &keeperAEAD{k: s.keeper, timeout: s.timeout}
	h, err := keyset.ReadWithContext(ctx, keyset.NewBinaryReader(bytes.NewReader(raw)), kek, ad)
	if err != nil {
		// Tink formats the keeper's error with %v, so errors.As cannot find
		// it in err: the adapter records it instead.
		if kek.err != nil {
			return nil, keeperError("unwrap data key", kek.err)
		}
		return nil, fmt.Errorf("claimcheck: unseal: data key does not open for this tenant and key: %w", ErrPayloadCorrupt)
	}
	p, err := streamingaead.New(h)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: unseal: %w: %w", ErrPayloadCorrupt, err)
	}
	return p, nil
}

// keeperError classifies a keeper failure as ErrKeeper ("keeper-failed"),
// whatever the keeper said: a disabled key, a key the caller may not use
// (AccessDeniedException, which gocloud reports as PermissionDenied), one
// pending deletion or missing, or a keeper that cannot be reached. It is a
// transient configuration error (retried while an operator fixes the key),
// never "missing" or "corrupt", and check-in never falls back to plaintext.
//
// Unlike a store's, the keeper's own message is kept: it is about the
// key-encryption key (a KMS names the key's id or ARN), never an object key
// or payload bytes.
func keeperError(what string, err error) error {
	hint := " (can the keeper be reached, and is its key enabled and usable by this caller?)"
	if strings.HasPrefix(what, "unwrap") {
		hint = " (is --keeper the keeper, and key, that encrypted this payload? is the key enabled and usable by this caller? can it be reached?)"
	}
	return &classError{class: ErrKeeper, msg: "claimcheck: keeper cannot " + what + hint + ": " + err.Error(), cause: err}
}

// keeperAEAD adapts a secrets.Keeper, which has no associated data, to
// Tink's AEADWithContext: the associated data is prefixed (length first) to
// the plaintext the keeper encrypts and checked on decryption, so a wrapped
// key only opens for the tenant and key it was made for.
//
// err records the keeper's own failure, if any: Tink does not wrap the
// errors it gets back (it formats them with %v), and the keeper's error
// decides the class (keeperError). One keeperAEAD per Tink call.
type keeperAEAD struct {
	k       *secrets.Keeper
	timeout time.Duration // of each call; 0: DefaultKeeperTimeout
	err     error
}

// call runs one keeper call within a.timeout; a call cut by that bound
// (not by ctx) fails with a *callTimeout naming it.
func (a *keeperAEAD) call(ctx context.Context, f func(context.Context, []byte) ([]byte, error), in []byte) ([]byte, error) {
	bound := a.timeout
	if bound <= 0 {
		bound = DefaultKeeperTimeout
	}
	kctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	out, err := f(kctx, in)
	if err != nil && ctx.Err() == nil && errors.Is(kctx.Err(), context.DeadlineExceeded) {
		err = &callTimeout{what: "the keeper", after: bound, err: err}
	}
	return out, err
}

func (a *keeperAEAD) EncryptWithContext(ctx context.Context, pt, ad []byte) ([]byte, error) {
	msg := binary.BigEndian.AppendUint32(nil, uint32(len(ad)))
	msg = append(append(msg, ad...), pt...)
	ct, err := a.call(ctx, a.k.Encrypt, msg)
	if err != nil {
		a.err = err
		return nil, err
	}
	return ct, nil
}

func (a *keeperAEAD) DecryptWithContext(ctx context.Context, ct, ad []byte) ([]byte, error) {
	msg, err := a.call(ctx, a.k.Decrypt, ct)
	if err != nil {
		// A keeper cannot tell a tampered wrapped key from a wrong or
		// unreachable key-encryption key: treat it as a configuration error
		// (retried, reported). Only what we prove below is corruption.
		a.err = err
		return nil, err
	}
	if len(msg) < 4 {
		return nil, errors.New("wrapped key too short")
	}
	n := binary.BigEndian.Uint32(msg)
	if uint64(len(msg)-4) < uint64(n) || !bytes.Equal(msg[4:4+n], ad) {
		return nil, errors.New("wrapped key is bound to another tenant or key")
	}
	return msg[4+n:], nil
}
