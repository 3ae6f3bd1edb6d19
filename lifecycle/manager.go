package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/claimcheck/claimcheck"
)

// Manager reads and writes one bucket's lifecycle configuration: the
// capability a store driver gives to a store whose service keeps one
// (stores/s3store), as gocloud keeps provider code behind its drivers.
// Apply, and ops' doctor and start-up checks, reach the service only
// through it, so neither they nor this package import a storage SDK.
type Manager interface {
	// LifecycleBucket names the bucket, for reports.
	LifecycleBucket() string
	// ReadLifecycle returns the bucket's configuration; one the bucket does
	// not have (S3: NoSuchLifecycleConfiguration) is an empty Configuration
	// with Found false, not an error. owner, when not "", is the account
	// that must own the bucket (S3: ExpectedBucketOwner); a service without
	// that notion ignores it. Errors are the service's, wrapped in a
	// *StoreError when it answered with an error code.
	ReadLifecycle(ctx context.Context, owner string) (*Configuration, error)
	// WriteLifecycle replaces the bucket's configuration with c: each rule
	// with a Native form as it is, the others built from their fields, and
	// c.Native's service settings kept. Errors as ReadLifecycle's.
	WriteLifecycle(ctx context.Context, c *Configuration, owner string) error
}

// Provider is implemented by the claimcheck.StoreHooks of a store driver
// that can manage its buckets' lifecycle configurations. LifecycleManager
// returns nil when this bucket's cannot be managed (S3: a bucket given to
// claimcheck.NewStore, whose name the driver does not know).
type Provider interface {
	LifecycleManager() Manager
}

// Configuration is a bucket's lifecycle configuration.
type Configuration struct {
	// Rules are the bucket's rules, in their order.
	Rules []Rule
	// Found is false when the bucket has no configuration at all.
	Found bool
	// Native holds the service's settings of the configuration beyond its
	// rules (S3: TransitionDefaultMinimumObjectSize), which a write of a
	// configuration read keeps; nil for none.
	Native any
}

// ErrNoManager is returned by ManagerOf for a store whose driver manages no
// lifecycle configuration (file://, mem://, gs://).
var ErrNoManager = errors.New("the store has no lifecycle configuration claimcheck can read or write")

// ManagerOf returns the Manager of st's bucket, from its driver's hooks
// (Provider). Errors: ErrNoManager, wrapping claimcheck.ErrConfig, when
// there is none.
func ManagerOf(st *claimcheck.Store) (Manager, error) {
	if p, ok := st.Hooks().(Provider); ok {
		if m := p.LifecycleManager(); m != nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("lifecycle: %w: %w", ErrNoManager, claimcheck.ErrConfig)
}

// StoreError is an error code a storage service answered a lifecycle
// request with.
type StoreError struct {
	// Op is "get" or "put", Bucket the bucket's name.
	Op, Bucket string
	// Code is the service's error code (S3: AccessDenied, NoSuchBucket, ...).
	Code string
	// Permission is, for an access denied, the permission the request
	// needs (S3: s3:GetLifecycleConfiguration); "" otherwise.
	Permission string
	// Err is the service's error.
	Err error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("lifecycle: %s lifecycle configuration of bucket %s: %v", e.Op, e.Bucket, e.Err)
}

func (e *StoreError) Unwrap() error { return e.Err }

// Text names the failure for a report: "ACCESS DENIED (allow PERMISSION)"
// or the code.
func (e *StoreError) Text() string {
	if e.Permission != "" {
		return "ACCESS DENIED (allow " + e.Permission + ")"
	}
	return e.Code
}
