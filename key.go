package claimcheck

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"mime"
	"strings"
)

// Object keys. Every key lives under a role prefix and then its tenant's
// prefix, so lifecycle rules can give inputs and results their own retention
// and a worker's access can be scoped to its tenants:
//
//	payloads/<tenant>/<first two hex chars>/<digest>   content-addressed (default)
//	payloads/<tenant>/named/<name>[@<version>]         named by the caller
//	results/<tenant>/...                               the same shapes, for results
//
// The two-character shard spreads writes across S3's per-prefix request
// rates ("Object storage rate limits are per prefix", docs/invariants.md).
//
// Outcome records of finished handlers whose job's completion failed on
// its first try live beside them, under PrefixOutcomes (outcomes/<job
// id>-<created>.json, no tenant: they hold tickets, never payload bytes;
// docs/invariants.md, invariant 12).
const (
	PrefixPayloads = "payloads/"
	PrefixResults  = "results/"
	PrefixOutcomes = "outcomes/"
)

// Input limits, in bytes. They keep every offloaded ticket within
// MaxTicketBytes (see TestTicketWorstCaseFitsBudget).
const (
	MaxTenantLen      = 48
	MaxNameLen        = 48
	MaxVersionLen     = 24
	MaxContentTypeLen = 48
	MaxStoreNameLen   = 16
)

// ValidateTenant checks a tenant identifier: 1 to MaxTenantLen bytes of
// lowercase ASCII letters, digits, '-' and '_', starting with a letter or
// digit. It returns a plain error describing the problem.
func ValidateTenant(tenant string) error {
	if tenant == "" {
		return errors.New("tenant is empty")
	}
	if len(tenant) > MaxTenantLen {
		return fmt.Errorf("tenant is %d bytes, at most %d allowed", len(tenant), MaxTenantLen)
	}
	for i := 0; i < len(tenant); i++ {
		c := tenant[i]
		switch {
		case (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'):
		case c == '-' || c == '_':
			if i == 0 {
				return errors.New("tenant must start with a-z or 0-9")
			}
		case c >= 0x80:
			return fmt.Errorf("tenant has a non-ASCII character at byte %d: use a-z, 0-9, '-', '_'", i)
		default:
			return fmt.Errorf("tenant has character %q at byte %d: use a-z, 0-9, '-', '_'", c, i)
		}
	}
	return nil
}

func validateStoreName(name string) error {
	if name == "" || len(name) > MaxStoreNameLen {
		return fmt.Errorf("store name must be 1 to %d bytes", MaxStoreNameLen)
	}
	if err := ValidateTenant(name); err != nil { // same alphabet
		return fmt.Errorf("store name: %s", strings.TrimPrefix(err.Error(), "tenant "))
	}
	return nil
}

func validateContentType(ct string) error {
	if ct == "" {
		return nil
	}
	if len(ct) > MaxContentTypeLen {
		return fmt.Errorf("content type is %d bytes, at most %d allowed", len(ct), MaxContentTypeLen)
	}
	if strings.ContainsAny(ct, "<>&\"\\") {
		return errors.New("content type has a character outside RFC 6838 tokens")
	}
	for i := 0; i < len(ct); i++ {
		if ct[i] < 0x20 || ct[i] > 0x7e {
			return errors.New("content type is not printable ASCII")
		}
	}
	if _, _, err := mime.ParseMediaType(ct); err != nil {
		return fmt.Errorf("content type does not parse: %v", err)
	}
	return nil
}

// validateSegment accepts one path segment of a named key or version.
func validateSegment(s string, allowSlash bool) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '_' || c == '.' || (allowSlash && c == '/')
		if !ok {
			return fmt.Errorf("character %q at byte %d: use A-Z, a-z, 0-9, '-', '_', '.'", c, i)
		}
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return errors.New("empty, '.' or '..' path segment")
		}
	}
	return nil
}

// validateKey checks that key is a well-formed key of tenant's: under a role
// prefix and the tenant's own prefix, with no traversal segments.
func validateKey(key, tenant string) error {
	var rest string
	switch {
	case strings.HasPrefix(key, PrefixPayloads+tenant+"/"):
		rest = key[len(PrefixPayloads+tenant+"/"):]
	case strings.HasPrefix(key, PrefixResults+tenant+"/"):
		rest = key[len(PrefixResults+tenant+"/"):]
	default:
		return errors.New("key is not under its tenant's prefix")
	}
	if len(key) > len(PrefixPayloads)+MaxTenantLen+len("/named/")+MaxNameLen+1+MaxVersionLen {
		return errors.New("key is too long")
	}
	if strings.HasSuffix(key, ".tmp") || strings.HasSuffix(key, ".attrs") {
		return errors.New("key has a suffix reserved for the store's own files")
	}
	name, version, hasVersion := strings.Cut(rest, "@")
	if err := validateSegment(name, true); err != nil {
		return fmt.Errorf("key: %v", err)
	}
	if hasVersion {
		if err := validateSegment(version, false); err != nil {
			return fmt.Errorf("key version: %v", err)
		}
	}
	return nil
}

// keyPolicy names objects. contentKey is used when the caller gives no
// name: the digest of the content, salted per tenant when the deployment
// has a secret.
type keyPolicy struct {
	secret []byte
}

// tenantMAC returns the hash that computes the key digest for tenant's
// content, or nil when keys are plain SHA-256 content addresses. The tenant
// key is HMAC-SHA256(secret, "claimcheck/tenant-key/v1\x00" || tenant), so
// the same content under two tenants lands on two unrelated keys and no
// tenant can test for another's content (docs/invariants.md, invariant 2).
func (p keyPolicy) tenantMAC(tenant string) hash.Hash {
	if len(p.secret) == 0 {
		return nil
	}
	m := hmac.New(sha256.New, p.secret)
	m.Write([]byte("claimcheck/tenant-key/v1\x00"))
	m.Write([]byte(tenant))
	return hmac.New(sha256.New, m.Sum(nil))
}

func rolePrefix(result bool) string {
	if result {
		return PrefixResults
	}
	return PrefixPayloads
}

// contentKey is <role>/<tenant>/<first two hex>/<digest>.
func contentKey(result bool, tenant, digest string) string {
	return rolePrefix(result) + tenant + "/" + digest[:2] + "/" + digest
}

// namedKey is <role>/<tenant>/named/<name>[@<version>], after validation.
func namedKey(result bool, tenant, name, version string) (string, error) {
	if len(name) > MaxNameLen {
		return "", fmt.Errorf("name is %d bytes, at most %d allowed", len(name), MaxNameLen)
	}
	if err := validateSegment(name, true); err != nil {
		return "", fmt.Errorf("name: %v", err)
	}
	key := rolePrefix(result) + tenant + "/named/" + name
	if version != "" {
		if len(version) > MaxVersionLen {
			return "", fmt.Errorf("version is %d bytes, at most %d allowed", len(version), MaxVersionLen)
		}
		if err := validateSegment(version, false); err != nil {
			return "", fmt.Errorf("version: %v", err)
		}
		key += "@" + version
	}
	return key, nil
}
