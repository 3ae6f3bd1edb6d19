package claimcheck

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"gocloud.dev/blob"
)

// A StoreDriver adds what claimcheck needs of one storage service beyond
// its gocloud.dev/blob driver: URL parameters of claimcheck's own, upload
// settings and checksums, error mapping. Each store lives in a package of
// its own that registers its scheme when imported, as gocloud's drivers
// register their URL openers: stores/s3store registers a StoreDriver with
// RegisterStoreDriver in its init function; stores/gcsstore needs none and
// only imports gocloud's gcsblob. The root package imports no storage
// service.
//
// A scheme with no StoreDriver (file://, mem://, any other gocloud driver
// the program imports) is opened with blob.OpenBucket and no hooks.
type StoreDriver interface {
	// OpenBucket opens the bucket at u, whose scheme is the driver's,
	// taking out the URL parameters that are claimcheck's own, and returns
	// it with its hooks (nil for none). Errors are reported by OpenStore as
	// ErrConfig; their text must name no credentials.
	OpenBucket(ctx context.Context, u *url.URL) (*blob.Bucket, StoreHooks, error)
	// Hooks returns the hooks for b, a bucket opened elsewhere and given
	// to NewStore, or nil when b is not this driver's.
	Hooks(b *blob.Bucket) StoreHooks
}

// StoreHooks are a StoreDriver's calls into one bucket's check-ins.
type StoreHooks interface {
	// BeforeWrite prepares the upload of a check-in's object: as is
	// blob.WriterOptions.BeforeWrite's. An error fails the check-in before
	// anything is sent.
	BeforeWrite(as func(any) bool, up Upload) error
	// CheckExisting is called with the attributes of an object already at
	// a check-in's key that records the same payload, before the check-in
	// takes that object for its own; an error refuses it (for example, an
	// object stored without the server-side encryption the store requires).
	// The error goes through the store's classification (StoreConfigError).
	CheckExisting(attrs *blob.Attributes) error
	// Refresh restarts the age of the object at key, which a new check-in
	// reuses (Store.refresh, housekeeping.go), reporting gone when it does
	// not exist any more; a store that cannot leaves it as it is and
	// returns false, nil.
	Refresh(ctx context.Context, key string) (gone bool, err error)
	// Clock reads the store's own clock (Store.Clock); ok is false when
	// the store cannot tell.
	Clock(ctx context.Context) (now time.Time, ok bool, err error)
	// IncompleteUploads calls fn for each incomplete multipart upload
	// under prefix (Store.IncompleteUploads); fn's errors are returned as
	// they are. A store without multipart uploads returns nil.
	IncompleteUploads(ctx context.Context, prefix string, fn func(IncompleteUpload) error) error
	// AbortUpload aborts one (Store.AbortUpload); one already gone is not
	// an error.
	AbortUpload(ctx context.Context, u IncompleteUpload) error
}

// Upload describes the object a check-in is about to write, for
// StoreHooks.BeforeWrite.
type Upload struct {
	// Size is the payload's size in bytes (the plaintext's when Sealed).
	Size int64
	// SHA256 is the payload's digest, lowercase hex.
	SHA256 string
	// Sealed means the bytes sent are ciphertext, whose digest and exact
	// size are not known before they are sent.
	Sealed bool
}

// StoreCauseError is implemented by errors of a StoreDriver's bucket (at
// any depth of the chain) whose cause the driver can name beyond
// gcerrors' codes. StoreCause returns a phrase describing the cause that
// may name the bucket, the endpoint and the fix, never an object key or
// credentials, and the cause, one of ErrNoBucket, ErrWrongRegion,
// ErrArchived or the network causes (ErrDNS, ...). The store reports such an error as
// ErrUnavailable (a job waits while an operator fixes it; never
// ErrPayloadMissing) with that phrase, and as ErrConfig at start-up for
// ErrNoBucket and ErrWrongRegion (Store.CheckBucket). A driver should also
// keep gcerrors.Code from reading such an error as NotFound.
type StoreCauseError interface {
	error
	StoreCause() (description string, cause error)
}

// BucketChecker is implemented by StoreHooks that can tell whether the
// bucket exists and is the one the URL means (S3: HeadBucket), for
// Store.CheckBucket and for a claim that finds no object, which is
// ErrPayloadMissing only once the bucket is known to be there. CheckBucket
// returns nil, or an error the store classifies (a StoreCauseError where
// the cause is known).
type BucketChecker interface {
	CheckBucket(ctx context.Context) error
}

// ReaderMetadata is implemented by StoreHooks whose reads return the
// object's metadata with its bytes (S3: GetObject's x-amz-meta-* headers):
// a claim of an encrypted object then reads its wrapped data key from the
// read (blob.Reader.As is as) instead of asking for the object's
// attributes first, one request instead of two. ok is false when the
// read's metadata cannot be had; the claim then asks for the attributes.
// The map is what blob.Attributes' Metadata would be: keys and values as
// they were written.
type ReaderMetadata interface {
	ReaderMetadata(as func(any) bool) (md map[string]string, ok bool)
}

// StoreConfigError is implemented by errors a StoreDriver returns (at any
// depth of the chain) for a failure of the store's configuration rather
// than of the payload or the service, such as server-side encryption
// requested and not applied. The store reports such an error as ErrConfig
// with the text StoreConfigError returns, which must name no object key.
type StoreConfigError interface {
	error
	StoreConfigError() string
}

var (
	storeDriversMu sync.RWMutex
	storeDrivers   = map[string]StoreDriver{}
)

// RegisterStoreDriver makes OpenStore open URLs of scheme with d. It panics
// if scheme already has a driver (two packages claiming one scheme is a
// programming error, as in gocloud's URL muxes).
func RegisterStoreDriver(scheme string, d StoreDriver) {
	storeDriversMu.Lock()
	defer storeDriversMu.Unlock()
	if _, dup := storeDrivers[scheme]; dup {
		panic(fmt.Sprintf("claimcheck: RegisterStoreDriver: scheme %q registered twice", scheme))
	}
	storeDrivers[scheme] = d
}

func storeDriver(scheme string) StoreDriver {
	storeDriversMu.RLock()
	defer storeDriversMu.RUnlock()
	return storeDrivers[scheme]
}

// hooksFor asks each registered driver for b's hooks (NewStore).
func hooksFor(b *blob.Bucket) StoreHooks {
	storeDriversMu.RLock()
	defer storeDriversMu.RUnlock()
	for _, d := range storeDrivers {
		if h := d.Hooks(b); h != nil {
			return h
		}
	}
	return nil
}

// NetBoundsFromURL takes claimcheck's connect_timeout and stall_timeout
// parameters out of u, a store URL, for a StoreDriver to bound its
// client's connections with (bounds.go): each a Go duration from 100ms to
// 1h, defaulting to DefaultConnectTimeout and DefaultStallTimeout. The error
// names the parameter.
func NetBoundsFromURL(u *url.URL) (connect, stall time.Duration, err error) {
	b, err := netBoundsFromURL(u)
	return b.connect, b.stall, err
}

// Hooks returns the store's StoreHooks (its driver's), or nil: for a
// driver's own helpers, such as s3store.PartSize.
func (s *Store) Hooks() StoreHooks { return s.hooks }
