package ops

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

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
