package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
)

// ExpiryDays returns the expiry, in days, that the bucket's lifecycle
// configuration applies to every object under prefix (the shortest rule
// covering the whole prefix) and that rule's name. ok is false when the
// expiry is unknown: the store is not S3 (a file store's expiry is the
// sweeper's --expire flags), no rule covers the prefix, or the configuration
// cannot be read, in which case err says why.
func ExpiryDays(ctx context.Context, st *claimcheck.Store, storeURL, prefix string) (days int, rule string, ok bool, err error) {
	scheme, bucket := storeScheme(storeURL)
	if scheme != "s3" {
		return 0, "", false, nil
	}
	var c *s3.Client
	if !st.Bucket().As(&c) {
		return 0, "", false, errors.New("the s3:// store exposes no S3 client")
	}
	out, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchLifecycleConfiguration" {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, err
	}
	e := evaluateExpiry(out.Rules, prefix, 0)
	return e.cover, e.coverRule, e.cover > 0, nil
}

// lifecycleCache holds each bucket's lifecycle configuration as first read
// by StartupExpiry in this process, keyed by the S3 client and bucket.
var lifecycleCache sync.Map // lifecycleKey → *lifecycleRead

type lifecycleKey struct {
	client *s3.Client
	bucket string
}

type lifecycleRead struct {
	once  sync.Once
	rules []types.LifecycleRule
	found bool
	err   error
}

// StartupExpiry is the start-up retention check of submit and work: on
// an S3 store, the expiry rows Doctor reports for payloads/ and results/
// (inside the store's namespace) that fail against r, the lifetimes
// `claimcheck retention` computes from the same settings: a rule that
// expires objects, or moves them to an archive tier, sooner than required,
// or on a fixed date. nil when nothing fails, and for stores without a
// lifecycle engine claimcheck can read (file://, where the sweeper's
// --expire flags set expiry; gs://). The bucket's lifecycle configuration
// is read once per process and bucket (cached: a later call does not see a
// rule changed since). err says why the configuration could not be read
// (the credentials may lack s3:GetLifecycleConfiguration), and checks is
// then nil.
func StartupExpiry(ctx context.Context, st *claimcheck.Store, r *claimcheck.Retention) (checks []Check, err error) {
	scheme, bucket := storeScheme(st.Location())
	if scheme != "s3" {
		return nil, nil
	}
	var c *s3.Client
	if !st.Bucket().As(&c) {
		return nil, errors.New("the s3:// store exposes no S3 client")
	}
	v, _ := lifecycleCache.LoadOrStore(lifecycleKey{c, bucket}, &lifecycleRead{})
	lr := v.(*lifecycleRead)
	lr.once.Do(func() {
		out, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
		var ae smithy.APIError
		switch {
		case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchLifecycleConfiguration":
		case err != nil:
			lr.err = fmt.Errorf("read the lifecycle configuration of bucket %s: %s", bucket, lifecycleErrText(err))
		default:
			lr.rules, lr.found = out.Rules, true
		}
	})
	if lr.err != nil {
		lifecycleCache.CompareAndDelete(lifecycleKey{c, bucket}, lr) // try again next time
		return nil, lr.err
	}
	rows, _ := expiryRows(lr.rules, lr.found, bucket, st.Namespace(), r)
	for _, row := range rows {
		if strings.HasPrefix(row.Name, CheckExpiry) && row.Status == StatusFail {
			checks = append(checks, row)
		}
	}
	return checks, nil
}

// lifecycleErrText names why a lifecycle configuration could not be read.
func lifecycleErrText(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if ae.ErrorCode() == "AccessDenied" {
			return "ACCESS DENIED (allow s3:GetLifecycleConfiguration)"
		}
		return ae.ErrorCode()
	}
	if why, _ := claimcheck.CauseOf(err); why != "" {
		return why
	}
	return fmt.Sprintf("store code %v", gcerrors.Code(err))
}
