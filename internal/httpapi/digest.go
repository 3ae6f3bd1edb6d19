package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

// MaxDigestHeaderLen is the longest Content-Digest header accepted, in
// bytes.
const MaxDigestHeaderLen = 1024

// errDigestMismatch is a payload or result whose SHA-256 is not the one
// its Content-Digest gave.
var errDigestMismatch = errors.New("content digest mismatch")

// ParseContentDigest reads the SHA-256 out of a Content-Digest header
// (RFC 9530, section 2: a Structured Fields dictionary, RFC 8941, of
// algorithm = :base64 byte sequence:, e.g. `sha-256=:X48E9q...=:`). It
// returns the 32-byte digest and true when the header carries sha-256; nil
// and false for an empty header or one with only other algorithms
// (ignored, as RFC 9530 section 2 allows). Errors: a plain error for a
// header longer than MaxDigestHeaderLen, a malformed member, a sha-256
// value that is not base64 of 32 bytes, or sha-256 given twice.
func ParseContentDigest(h string) ([]byte, bool, error) {
	if len(h) > MaxDigestHeaderLen {
		return nil, false, fmt.Errorf("Content-Digest is %d bytes, at most %d", len(h), MaxDigestHeaderLen)
	}
	var sum []byte
	if strings.TrimSpace(h) == "" {
		return nil, false, nil
	}
	for member := range strings.SplitSeq(h, ",") {
		member = strings.Trim(member, " \t")
		key, value, ok := strings.Cut(member, "=")
		if !ok || !validKey(key) {
			return nil, false, errors.New("Content-Digest: each member must be an algorithm and a byte sequence (sha-256=:BASE64:)")
		}
		if i := strings.IndexByte(value, ';'); i >= 0 {
			value = value[:i] // parameters: none defined, ignored (RFC 8941 3.2)
		}
		if len(value) < 2 || value[0] != ':' || value[len(value)-1] != ':' {
			return nil, false, fmt.Errorf("Content-Digest: %s's value must be a byte sequence (:BASE64:)", key)
		}
		if key != "sha-256" {
			continue
		}
		if sum != nil {
			return nil, false, errors.New("Content-Digest: sha-256 given twice")
		}
		b, err := base64.StdEncoding.Strict().DecodeString(value[1 : len(value)-1])
		if err != nil || len(b) != sha256.Size {
			return nil, false, errors.New("Content-Digest: sha-256 must be the base64 of 32 bytes")
		}
		sum = b
	}
	return sum, sum != nil, nil
}

// validKey is an RFC 8941 key: lowercase letter or '*', then lowercase
// letters, digits, '_', '-', '.', '*'.
func validKey(k string) bool {
	if k == "" || len(k) > 64 || !(k[0] >= 'a' && k[0] <= 'z' || k[0] == '*') {
		return false
	}
	for i := 1; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0) {
			return false
		}
	}
	return true
}

// FormatContentDigest is the Content-Digest header of a hex SHA-256
// (a ticket's), "" if hexSum is not one.
func FormatContentDigest(hexSum string) string {
	b, err := hex.DecodeString(hexSum)
	if err != nil || len(b) != sha256.Size {
		return ""
	}
	return "sha-256=:" + base64.StdEncoding.EncodeToString(b) + ":"
}

// digestReader passes r through, hashing it, and at r's end returns
// errDigestMismatch instead of io.EOF if the bytes' SHA-256 is not want:
// whoever reads it (a check-in) never sees the end of a payload that does
// not match, so it stores and enqueues nothing.
type digestReader struct {
	r    io.Reader
	h    hash.Hash
	want []byte
}

func newDigestReader(r io.Reader, want []byte) *digestReader {
	return &digestReader{r: r, h: sha256.New(), want: want}
}

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	if err == io.EOF {
		if got := d.h.Sum(nil); string(got) != string(d.want) {
			return n, fmt.Errorf("httpapi: the body's SHA-256 is not the one Content-Digest gave: %w", errDigestMismatch)
		}
	}
	return n, err
}
