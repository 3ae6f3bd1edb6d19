package claimcheck

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Key ids. Every sealed object records the id of the key-encryption key
// that wrapped its data key (metaKEKID): an id, never the key. A check-in
// reuses an object only when it was sealed under the same id, and a worker
// that cannot unwrap one names the id it needs.

// metaKEKID is the object metadata entry holding the key-encryption key's id.
const metaKEKID = "claimcheck-kek-id"

// LocalKeyID is the id of a local 32-byte key-encryption key (a key file,
// base64key://): "local-" and the first 16 hex digits of a SHA-256 of the
// key under a fixed label. It identifies the key without revealing it.
func LocalKeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("claimcheck/kek-id/v1\x00"))
	h.Write(key)
	return "local-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// DecodeLocalKey reads a local key-encryption key as written in a key file
// or a base64key:// URL: 32 bytes in base64, URL-safe (gocloud's
// localsecrets) or standard alphabet, padded or not, surrounding space
// ignored. It returns a plain error describing the problem.
func DecodeLocalKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.URLEncoding, base64.StdEncoding, base64.RawURLEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("key is %d bytes, want 32", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("key is not base64")
}

// KeeperID is the id claimcheck records for the key behind a
// gocloud.dev/secrets keeper URL: LocalKeyID for base64key://KEY, and for a
// KMS (awskms://, gcpkms://, azurekeyvault://, hashivault://) its scheme and
// key name, without query parameters (region, endpoint...), as in
// "awskms:alias/claimcheck". Errors: ErrConfig for a URL that does not
// parse or a base64key:// that does not hold 32 bytes.
func KeeperID(keeperURL string) (string, error) {
	u, err := url.Parse(keeperURL)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("claimcheck: keeper URL does not parse: %w", ErrConfig)
	}
	if u.Scheme == "base64key" {
		k, err := DecodeLocalKey(strings.TrimPrefix(strings.SplitN(keeperURL, "?", 2)[0], "base64key://"))
		if err != nil {
			return "", fmt.Errorf("claimcheck: base64key://: %v: %w", err, ErrConfig)
		}
		return LocalKeyID(k), nil
	}
	return u.Scheme + ":" + strings.TrimPrefix(u.Host+u.Path, "/"), nil
}

// kekTag is the short form of a key id that names sealed content-addressed
// objects (<digest>.<tag>), so that the same bytes sealed under two keys,
// or stored plain and sealed, are two objects, never one reused for both.
func kekTag(keyID string) string {
	sum := sha256.Sum256([]byte("claimcheck/kek-tag/v1\x00" + keyID))
	return "k" + hex.EncodeToString(sum[:])[:8]
}

// KeyIDText shows a recorded key id as messages print it: the id, or
// "(unrecorded)" for an empty one (an object sealed before key ids were
// recorded, or a keeper given no KeeperID).
func KeyIDText(id string) string {
	if id == "" {
		return "(unrecorded)"
	}
	return id
}
