package claimcheck

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/streamingaead"
	"github.com/tink-crypto/tink-go/v2/tink"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"gocloud.dev/secrets"
)

// Envelope encryption (sealing). Each object gets a fresh data key, a Tink
// streaming-AEAD keyset (AES256-GCM-HKDF; 1 MiB segments, 4 KiB for a
// payload known to be at most 1 MiB: newObjectKey) that encrypts the
// bytes as they stream; an inline payload, held in memory whole, is
// encrypted in one call under a Tink AEAD keyset (AES256-GCM) that a
// tenant's inline payloads share within limits (inlinekeys.go; inline
// tickets sealed with the streaming AEAD before are
// still read: openInline). The keyset is wrapped by a key-encryption key held
// by a gocloud.dev/secrets Keeper (a local key file, AWS KMS, GCP KMS, Azure
// Key Vault), which neither the broker operator nor the store holds. The
// wrapped keyset is bound (the keeper's associated data) to the tenant and
// the object key, so a data key only opens for the object it was made for.
//
// A sealed object is in one of two formats, told apart by its metadata
// (sealFormat):
//
//   - v1 (no metaSeal entry): the ciphertext's associated data is the
//     tenant and the object key too (associatedData). The key, a content
//     address, is known only once the whole payload is hashed, so the
//     payload is read twice: hashed, then encrypted. S3, GCS and the other
//     stores written through a bucket writer still write it, since their
//     upload (and its metadata) starts after the key is known anyway.
//   - v2 (metaSeal "2"): the ciphertext's associated data is the tenant
//     alone (objectAD), so a file:// check-in encrypts the payload into the
//     object's unnamed file as it hashes it, in one pass, and wraps the
//     data key, bound to the tenant and key as in v1, once the key is known
//     (sealWriter). Copied under another key, the object keeps its wrapped
//     key, which no longer unwraps; paired with another object's wrapped
//     key, its ciphertext does not decrypt.
//
// The wrapped data key travels in the object's metadata (offloaded payloads)
// or in the ticket's "dek" field (inline payloads, whose ticket is not held
// to the 512-byte budget). The ticket's sha256 and size always describe the
// plaintext and are verified after decryption.

// metaDEK is the object metadata entry holding the wrapped data key.
const metaDEK = "claimcheck-dek"

// sealer wraps and unwraps data keys with a keeper, each call bounded by
// timeout (Options.KeeperTimeout); keyID is the id of its key-encryption
// key, "" when the caller gave none (keeperid.go).
type sealer struct {
	keeper  *secrets.Keeper
	timeout time.Duration
	keyID   string
	// keys reuses inline data keys (inlinekeys.go); nil: a fresh one for
	// each inline payload, each unwrapped on every claim.
	keys *inlineKeys
}

// associatedData binds a wrapped data key, and a v1 object's or an inline
// payload's ciphertext, to its tenant and key (empty key for an inline
// payload).
func associatedData(tenant, key string) []byte {
	return []byte("claimcheck/seal/v1\x00" + tenant + "\x00" + key)
}

// metaSeal is the object metadata entry naming a sealed object's format
// when it is not v1: sealV2. An object without it is v1 (written before
// the entry existed, or through a bucket writer).
const metaSeal = "claimcheck-seal"

// sealV2 is metaSeal's value on a v2 object.
const sealV2 = "2"

// sealFormat is the format of a sealed object whose metadata is meta: 1
// without a metaSeal entry, 2 for exactly sealV2. Any other value is
// ErrConfig: a format this version does not read (written by a newer
// claimcheck), never guessed at.
func sealFormat(meta map[string]string) (int, error) {
	v, ok := meta[metaSeal]
	switch {
	case !ok:
		return 1, nil
	case v == sealV2:
		return 2, nil
	}
	return 0, fmt.Errorf("claimcheck: unseal: the object is sealed in a format this version of claimcheck does not read (upgrade it): %w", ErrConfig)
}

// objectAD is the associated data of a sealed object's ciphertext in
// format (sealFormat): v1 binds it to the tenant and key, v2 to the
// tenant alone (its wrapped data key binds it to the key).
func objectAD(format int, tenant, key string) []byte {
	if format == 2 {
		return []byte("claimcheck/seal/v2\x00" + tenant)
	}
	return associatedData(tenant, key)
}

// sealWriter encrypts an object in format v2 into w as it is written: its
// data key is made before the first byte and wrapped (sealer.wrap, bound
// to the tenant and key) only once the key is known, after the whole
// ciphertext is written (close). Memory: Tink's two segment buffers
// (newObjectKey); w's errors are its own.
type sealWriter struct {
	h  *keyset.Handle
	ew io.WriteCloser
}

// newSealWriter starts a v2 object of tenant's in w; size is the
// payload's size in bytes when known before it is read, else -1
// (newObjectKey).
func (s sealer) newSealWriter(w io.Writer, tenant string, size int64) (*sealWriter, error) {
	h, p, err := newObjectKey(size)
	if err != nil {
		return nil, err
	}
	ew, err := p.NewEncryptingWriter(w, objectAD(2, tenant, ""))
	if err != nil {
		return nil, fmt.Errorf("claimcheck: seal: %w: %w", ErrUnavailable, err)
	}
	return &sealWriter{h: h, ew: ew}, nil
}

func (w *sealWriter) Write(p []byte) (int, error) { return w.ew.Write(p) }

// close encrypts and writes the final segment.
func (w *sealWriter) close() error { return w.ew.Close() }

// smallSegmentsUpTo is the largest payload, in bytes, sealed with 4 KiB
// segments instead of 1 MiB ones. Tink's streaming AEAD allocates and
// zeroes buffers of a segment each for every stream it encrypts or
// decrypts: over 2 MiB at 1 MiB segments, which a payload of a few KiB
// paid on its check-in and again on every claim (in a CPU profile of
// claimcheck bench workload with every payload over 1 KiB offloaded,
// Tink's NewReader and NewWriter allocating them took 1.05 s of 14.75 s,
// before the collector's share). 4 KiB segments cost 16 bytes of tag per
// 4 KiB (0.4%). The segment size is part of the data key's keyset, so
// readers need nothing new.
const smallSegmentsUpTo = 1 << 20

// newObjectKey makes an object's fresh data key, a Tink streaming-AEAD
// keyset (AES256-GCM-HKDF), and its AEAD: 4 KiB segments for a payload
// known to be at most smallSegmentsUpTo bytes, 1 MiB segments when it is
// larger or its size is not known (size < 0).
func newObjectKey(size int64) (*keyset.Handle, tink.StreamingAEAD, error) {
	tmpl := streamingaead.AES256GCMHKDF1MBKeyTemplate()
	if size >= 0 && size <= smallSegmentsUpTo {
		tmpl = streamingaead.AES256GCMHKDF4KBKeyTemplate()
	}
	h, err := keyset.NewHandle(tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("claimcheck: seal: new data key: %w: %w", ErrUnavailable, err)
	}
	p, err := streamingaead.New(h)
	if err != nil {
		return nil, nil, fmt.Errorf("claimcheck: seal: %w: %w", ErrUnavailable, err)
	}
	return h, p, nil
}

// newDataKey makes a fresh streaming AEAD and its wrapped keyset (base64),
// for a v1 object of size bytes (newObjectKey).
func (s sealer) newDataKey(ctx context.Context, ad []byte, size int64) (tink.StreamingAEAD, string, error) {
	h, p, err := newObjectKey(size)
	if err != nil {
		return nil, "", err
	}
	wrapped, err := s.wrap(ctx, h, ad)
	if err != nil {
		return nil, "", err
	}
	return p, wrapped, nil
}

// newInlineKey makes a fresh one-shot AEAD (AES256-GCM) and its wrapped
// keyset (base64), for an inline payload: the whole payload is in memory,
// and a streaming AEAD would allocate its two 1 MiB segment buffers for a
// few KiB.
func (s sealer) newInlineKey(ctx context.Context, ad []byte) (tink.AEAD, string, error) {
	h, err := keyset.NewHandle(aead.AES256GCMKeyTemplate())
	if err != nil {
		return nil, "", fmt.Errorf("claimcheck: seal: new data key: %w: %w", ErrUnavailable, err)
	}
	wrapped, err := s.wrap(ctx, h, ad)
	if err != nil {
		return nil, "", err
	}
	p, err := aead.New(h)
	if err != nil {
		return nil, "", fmt.Errorf("claimcheck: seal: %w: %w", ErrUnavailable, err)
	}
	return p, wrapped, nil
}

// wrap wraps a keyset with the keeper, bound to ad.
func (s sealer) wrap(ctx context.Context, h *keyset.Handle, ad []byte) (string, error) {
	var buf bytes.Buffer
	kek := &keeperAEAD{k: s.keeper, timeout: s.timeout}
	if err := h.WriteWithContext(ctx, keyset.NewBinaryWriter(&buf), kek, ad); err != nil {
		if kek.err != nil {
			err = kek.err // Tink formats the keeper's error with %v: keep its code
		}
		return "", keeperError("wrap data key", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// unwrap unwraps a data key's keyset.
func (s sealer) unwrap(ctx context.Context, wrapped string, ad []byte) (*keyset.Handle, error) {
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
	return h, nil
}

// openDataKey unwraps an object's data key (a streaming AEAD).
func (s sealer) openDataKey(ctx context.Context, wrapped string, ad []byte) (tink.StreamingAEAD, error) {
	h, err := s.unwrap(ctx, wrapped, ad)
	if err != nil {
		return nil, err
	}
	p, err := streamingaead.New(h)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: unseal: %w: %w", ErrPayloadCorrupt, err)
	}
	return p, nil
}

// errInlineCiphertext is openInline's error for a ciphertext that does
// not decrypt under its (unwrapped) data key: tampered bytes.
var errInlineCiphertext = fmt.Errorf("claimcheck: unseal: inline ciphertext does not decrypt: %w", ErrPayloadCorrupt)

// openInline unwraps an inline payload's data key and decrypts ct with
// it, returning at most limit bytes (more: ErrPayloadCorrupt). The
// keyset's key type is the format's version: AES256-GCM (one-shot, written
// since the streaming AEAD's buffers were dropped for inline payloads), or
// the streaming AEAD that inline tickets carried before, still read.
func (s sealer) openInline(ctx context.Context, wrapped string, ad, ct []byte, limit int64) ([]byte, error) {
	corrupt := errInlineCiphertext
	if p, ok := s.opened(ad, wrapped); ok {
		b, err := p.Decrypt(ct, ad)
		if err != nil || int64(len(b)) > limit {
			return nil, corrupt
		}
		return b, nil
	}
	h, err := s.unwrap(ctx, wrapped, ad)
	if err != nil {
		return nil, err
	}
	if p, err := aead.New(h); err == nil {
		s.keepOpened(ad, wrapped, p)
		b, err := p.Decrypt(ct, ad)
		if err != nil || int64(len(b)) > limit {
			return nil, corrupt
		}
		return b, nil
	}
	p, err := streamingaead.New(h)
	if err != nil {
		return nil, fmt.Errorf("claimcheck: unseal: inline data key is of no known type: %w", ErrPayloadCorrupt)
	}
	dr, err := p.NewDecryptingReader(bytes.NewReader(ct), ad)
	if err != nil {
		return nil, corrupt
	}
	b, err := io.ReadAll(io.LimitReader(dr, limit+1))
	if err != nil || int64(len(b)) > limit {
		return nil, corrupt
	}
	return b, nil
}

// underKeyID names the sealer's key id for an error (" under key id
// awskms:…"), or nothing when the store was given none.
func (s *sealer) underKeyID() string {
	if s.keyID == "" {
		return ""
	}
	return " under key id " + s.keyID
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

// Seals reports whether the store seals the payloads it checks in
// (Options.Keeper set): their bytes in the bucket are ciphertext only a
// holder of the keeper can read.
func (s *Store) Seals() bool { return s.seal != nil }

// KeyID is the id of this store's key-encryption key (Options.KeeperID);
// "" when the store has no keeper or was given no id.
func (s *Store) KeyID() string {
	if s.seal == nil {
		return ""
	}
	return s.seal.keyID
}

// SealedKey reports whether the object at key (a key as listed in the
// store, relative to its namespace) is sealed and, if it is, the key id
// recorded on it, and checks that this store's keeper unwraps its data
// key. Only the object's attributes are read, never its bytes: operations
// tools (doctor) use it to prove that this host's keeper is the
// deployment's.
//
// Errors: ErrConfig when the object is sealed and this store has no
// keeper; ErrKeeper or ErrAccessDenied, naming both key ids, when the
// keeper cannot unwrap the data key; ErrPayloadCorrupt when it unwraps
// but is bound to another tenant or key; the store's errors (a missing
// object is ErrPayloadMissing).
func (s *Store) SealedKey(ctx context.Context, key string) (sealed bool, keyID string, err error) {
	attrs, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return false, "", storeError("claimcheck: read the attributes of a sealed object", err, true)
	}
	wrapped, keyID := attrs.Metadata[metaDEK], attrs.Metadata[metaKEKID]
	if wrapped == "" {
		return false, "", nil
	}
	if s.seal == nil {
		return true, keyID, fmt.Errorf("claimcheck: an object is sealed under key id %s and this store has no keeper: %w", KeyIDText(keyID), ErrConfig)
	}
	if _, err := s.seal.openDataKey(ctx, wrapped, associatedData(attrs.Metadata[metaTenant], key)); err != nil {
		return true, keyID, fmt.Errorf("claimcheck: an object is sealed under key id %s, this keeper has key id %s: %w", KeyIDText(keyID), KeyIDText(s.seal.keyID), err)
	}
	return true, keyID, nil
}

// SealedObject is a sealed object found by FindSealed: its key, relative to
// the store's namespace (a full key: print the tenant, never the key), its
// tenant and the key id recorded on it ("" when sealed before key
// ids were recorded).
type SealedObject struct {
	Key, Tenant, KeyID string
}

// FindSealed reads the attributes of up to scan objects, the first listed
// under payloads/ and then under results/ of this store's namespace, and
// returns the first sealed one of each recorded key id, in listing order
// (nil when none of them is sealed). Temporary files of unfinished writes
// are passed over. Only attributes are read, never bytes, and no keeper is
// called: it tells whether a deployment holds anything a key-encryption
// key protects (so that a lost key file is never silently replaced), and
// gives doctor objects to prove this host's keeper on (SealedKey).
//
// Errors: the store's, classified (ErrUnavailable, ErrAccessDenied,
// ErrConfig), without any object key in the message; an object deleted
// between the listing and the read is passed over. scan < 1 means 100.
func (s *Store) FindSealed(ctx context.Context, scan int) ([]SealedObject, error) {
	if scan < 1 {
		scan = 100
	}
	var found []SealedObject
	seen := map[string]bool{}
	for _, prefix := range []string{PrefixPayloads, PrefixResults} {
		if scan == 0 {
			break
		}
		objs, _, err := s.bucket.ListPage(ctx, blob.FirstPageToken, scan, &blob.ListOptions{Prefix: prefix})
		if err != nil && !errors.Is(err, io.EOF) { // io.EOF: an empty listing
			return nil, startupError("claimcheck: list the store's "+strings.TrimSuffix(prefix, "/")+" for sealed objects", err) // a start-up check: a wrong bucket is ErrConfig
		}
		for _, o := range objs {
			if o.IsDir || IsTempKey(o.Key) {
				continue
			}
			scan--
			attrs, err := s.bucket.Attributes(ctx, o.Key)
			if gcerrors.Code(err) == gcerrors.NotFound {
				continue
			}
			if err != nil {
				return nil, storeError("claimcheck: read the attributes of one of the store's "+strings.TrimSuffix(prefix, "/"), err, false)
			}
			id := attrs.Metadata[metaKEKID]
			if attrs.Metadata[metaDEK] == "" || seen[id] {
				continue
			}
			seen[id] = true
			tenant, _, _ := strings.Cut(strings.TrimPrefix(o.Key, prefix), "/")
			found = append(found, SealedObject{Key: o.Key, Tenant: tenant, KeyID: id})
		}
	}
	return found, nil
}
