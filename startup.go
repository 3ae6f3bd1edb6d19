package claimcheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"gocloud.dev/gcerrors"
)

// CheckBucket checks, at start-up, that the store's bucket exists and is
// the one its URL means (the driver's BucketChecker: S3's HeadBucket, which
// tells a missing bucket, a wrong region or endpoint, and missing
// path-style addressing apart), that it can be read (a HEAD of the
// namespace marker), and, when write is set, that it can be written and
// deleted from: a probe of 16 bytes under PrefixPayloads + "claimcheck-doctor/"
// is written and deleted (one the delete leaves is an orphan the sweeper
// collects).
//
// A file:// store's root directory must still be there (OpenStore made
// it): one removed since is ErrUnavailable, saying so.
//
// Errors name the store (Location) and the cause. ErrConfig, with the
// cause for errors.Is, when the URL is wrong (ErrNoBucket,
// ErrWrongRegion); ErrAccessDenied for refused credentials; ErrUnavailable
// for a store that cannot be reached (its cause named: ErrConnRefused,
// ErrDNS, ...).
func (s *Store) CheckBucket(ctx context.Context, write bool) error {
	if s.fileRoot != "" {
		fi, err := os.Stat(s.fileRoot)
		if err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
		if err != nil {
			return fmt.Errorf("claimcheck: store %s: its root directory is gone (%v): %w", s.location, pathErrNoName(err), ErrUnavailable)
		}
	}
	if bc, ok := s.hooks.(BucketChecker); ok {
		if err := bc.CheckBucket(ctx); err != nil {
			return startupError("claimcheck: store "+s.location, err)
		}
	}
	if _, err := s.bucket.Attributes(ctx, NamespaceMarkerKey); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return startupError("claimcheck: store "+s.location+": cannot read", err)
	}
	if !write {
		return nil
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := PrefixPayloads + startupProbeTenant + "/startup-probe-" + hex.EncodeToString(b[:])
	if err := s.bucket.WriteAll(ctx, key, []byte("claimcheck probe"), nil); err != nil {
		return startupError("claimcheck: store "+s.location+": cannot write under "+PrefixPayloads, err)
	}
	if err := s.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return startupError("claimcheck: store "+s.location+": wrote a probe under "+PrefixPayloads+" but cannot delete it (the sweeper needs to)", err)
	}
	return nil
}

// startupProbeTenant is the reserved tenant of CheckBucket's probe: the
// doctor's (ops.DoctorTenant), whose objects are all probes.
const startupProbeTenant = "claimcheck-doctor"

// startupError is storeError for a failure at start-up, where a wrong
// store URL (no such bucket, the wrong region or endpoint) is ErrConfig
// rather than a store to wait for.
func startupError(what string, err error) error {
	e := storeError(what, err, false)
	if errors.Is(e, ErrNoBucket) || errors.Is(e, ErrWrongRegion) || errors.Is(e, ErrNoCredentials) {
		var ce *classError
		if errors.As(e, &ce) {
			return &classError{class: ErrConfig, msg: ce.msg, cause: ce.cause}
		}
		return fmt.Errorf("%w: %w", e, ErrConfig)
	}
	return e
}
