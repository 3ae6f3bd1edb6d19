// Package s3test gives tests a fresh, empty bucket of their own on the S3
// server named by CLAIMCHECK_TEST_S3_URL (SeaweedFS on these machines:
// scripts/seaweedfs.sh), emptied and removed when the test ends, so tests
// that delete objects, remove buckets or apply lifecycle rules never touch
// one another's data.
//
// It is a test helper: its functions skip the test when the variable is
// unset and fail it when CI is set (internal/testenv.Require).
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
	_ "github.com/claimcheck/claimcheck/stores/s3store" // s3:// URLs
)

// Env is the variable naming the S3 server's store URL, for example
// s3://claimcheck-test?endpoint=http://127.0.0.1:8333&region=us-east-1&use_path_style=true.
const Env = "CLAIMCHECK_TEST_S3_URL"

// How is what to run to set Env on these machines.
const How = `scripts/seaweedfs.sh build && scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"`

// URL returns the store URL in CLAIMCHECK_TEST_S3_URL; without it the test
// is skipped (failed when CI is set).
func URL(t testing.TB) string {
	t.Helper()
	return testenv.Require(t, Env, How)
}

// Bucket is a bucket created for one test.
type Bucket struct {
	// Client is an S3 client for the server, built from the store URL the
	// way the s3:// store builds its own.
	Client *s3.Client
	// Name is the bucket's name: "claimcheck-" + prefix + "-" + 12 hex digits.
	Name string
	// URL is the store URL of CLAIMCHECK_TEST_S3_URL with this bucket as
	// its host.
	URL string
}

// New creates a bucket named "claimcheck-<prefix>-<12 random hex digits>"
// (prefix: lower-case letters, digits and dashes, at most 36 bytes, so the
// name stays within S3's 63) and removes it with every object and
// unfinished multipart upload in it when t ends. A bucket the test removed
// itself is not an error then.
func New(t testing.TB, prefix string) *Bucket {
	t.Helper()
	raw := URL(t)
	ctx := context.Background()
	shared, err := claimcheck.OpenStore(ctx, raw, nil)
	if err != nil {
		t.Fatalf("open %s: %v", Env, err)
	}
	var client *s3.Client
	if !shared.Bucket().As(&client) {
		shared.Close()
		t.Fatalf("%s: no S3 client behind the store", Env)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	b := &Bucket{Client: client, Name: "claimcheck-" + prefix + "-" + hex.EncodeToString(rnd[:])}
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b.Name)}); err != nil {
		shared.Close()
		t.Fatalf("create bucket %s: %v", b.Name, err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", Env, err)
	}
	u.Host = b.Name
	b.URL = u.String()
	t.Cleanup(func() {
		defer shared.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := b.remove(ctx); err != nil {
			t.Errorf("remove bucket %s: %v", b.Name, err)
		}
	})
	return b
}

// URLVia returns the bucket's store URL with its requests sent to
// endpoint (for example a fault-injecting proxy, "http://127.0.0.1:PORT")
// instead of the server itself.
func (b *Bucket) URLVia(endpoint string) string {
	u, _ := url.Parse(b.URL)
	q := u.Query()
	q.Set("endpoint", endpoint)
	u.RawQuery = q.Encode()
	return u.String()
}

// Empty deletes every object in the bucket, and aborts its unfinished
// multipart uploads.
func (b *Bucket) Empty(ctx context.Context) error {
	pages := s3.NewListObjectsV2Paginator(b.Client, &s3.ListObjectsV2Input{Bucket: aws.String(b.Name)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if _, err := b.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.Name), Key: o.Key}); err != nil {
				return err
			}
		}
	}
	ups, err := b.Client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(b.Name)})
	if err != nil {
		return err
	}
	for _, up := range ups.Uploads {
		_, _ = b.Client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(b.Name), Key: up.Key, UploadId: up.UploadId})
	}
	return nil
}

func (b *Bucket) remove(ctx context.Context) error {
	if err := b.Empty(ctx); err != nil {
		if noBucket(err) {
			return nil
		}
		return err
	}
	_, _ = b.Client.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: aws.String(b.Name)})
	if _, err := b.Client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b.Name)}); err != nil && !noBucket(err) {
		return err
	}
	return nil
}

func noBucket(err error) bool {
	var nb *types.NoSuchBucket
	if errors.As(err, &nb) {
		return true
	}
	var coded interface{ ErrorCode() string }
	return errors.As(err, &coded) && coded.ErrorCode() == "NoSuchBucket"
}
