package s3store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/claimcheck/claimcheck/lifecycle"
)

// LifecycleAPI is the part of *s3.Client a lifecycle Manager uses.
type LifecycleAPI interface {
	GetBucketLifecycleConfiguration(ctx context.Context, in *s3.GetBucketLifecycleConfigurationInput, optFns ...func(*s3.Options)) (*s3.GetBucketLifecycleConfigurationOutput, error)
	PutBucketLifecycleConfiguration(ctx context.Context, in *s3.PutBucketLifecycleConfigurationInput, optFns ...func(*s3.Options)) (*s3.PutBucketLifecycleConfigurationOutput, error)
}

var _ LifecycleAPI = (*s3.Client)(nil)

// LifecycleManager implements lifecycle.Provider: the lifecycle.Manager of
// the bucket OpenStore opened, on the bucket's own client; nil for a
// bucket given to claimcheck.NewStore (its name is unknown here: use
// NewLifecycleManager).
func (h *hooks) LifecycleManager() lifecycle.Manager { return h.lifecycle }

// NewLifecycleManager is the lifecycle.Manager of an S3 bucket through
// client: GetBucketLifecycleConfiguration and
// PutBucketLifecycleConfiguration, rules converted to and from
// lifecycle.Rule (each read rule's types.LifecycleRule kept as its Native
// form, written back as it is).
func NewLifecycleManager(client LifecycleAPI, bucket string) lifecycle.Manager {
	return &lifecycleManager{client: client, bucket: bucket}
}

type lifecycleManager struct {
	client LifecycleAPI
	bucket string
}

func (m *lifecycleManager) LifecycleBucket() string { return m.bucket }

// ReadLifecycle implements lifecycle.Manager; Configuration.Native is the
// bucket's TransitionDefaultMinimumObjectSize.
func (m *lifecycleManager) ReadLifecycle(ctx context.Context, owner string) (*lifecycle.Configuration, error) {
	out, err := m.client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(m.bucket), ExpectedBucketOwner: ownerParam(owner)})
	if isS3Code(err, "NoSuchLifecycleConfiguration") {
		return &lifecycle.Configuration{}, nil
	}
	if err != nil {
		return nil, m.storeError("get", "s3:GetLifecycleConfiguration", err)
	}
	c := &lifecycle.Configuration{Found: true, Native: out.TransitionDefaultMinimumObjectSize}
	for _, r := range out.Rules {
		c.Rules = append(c.Rules, ruleFromS3(r))
	}
	return c, nil
}

// WriteLifecycle implements lifecycle.Manager.
func (m *lifecycleManager) WriteLifecycle(ctx context.Context, c *lifecycle.Configuration, owner string) error {
	rules := make([]types.LifecycleRule, 0, len(c.Rules))
	for _, r := range c.Rules {
		rules = append(rules, ruleToS3(r))
	}
	minSize, _ := c.Native.(types.TransitionDefaultMinimumObjectSize)
	_, err := m.client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket:                             aws.String(m.bucket),
		ExpectedBucketOwner:                ownerParam(owner),
		LifecycleConfiguration:             &types.BucketLifecycleConfiguration{Rules: rules},
		TransitionDefaultMinimumObjectSize: minSize,
	})
	if err != nil {
		return m.storeError("put", "s3:PutLifecycleConfiguration", err)
	}
	return nil
}

// storeError wraps err in a *lifecycle.StoreError when S3 answered with an
// error code, naming permission for AccessDenied.
func (m *lifecycleManager) storeError(op, permission string, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return fmt.Errorf("lifecycle: %s lifecycle configuration of bucket %s: %w", op, m.bucket, err)
	}
	e := &lifecycle.StoreError{Op: op, Bucket: m.bucket, Code: ae.ErrorCode(), Err: err}
	if e.Code == "AccessDenied" {
		e.Permission = permission
	}
	return e
}

func ownerParam(owner string) *string {
	if owner == "" {
		return nil
	}
	return aws.String(owner)
}

// ruleFromS3 is r as a lifecycle.Rule, r itself its Native form.
func ruleFromS3(r types.LifecycleRule) lifecycle.Rule {
	out := lifecycle.Rule{ID: aws.ToString(r.ID), Disabled: r.Status != types.ExpirationStatusEnabled, Native: r}
	switch f := r.Filter; {
	case f == nil:
		//lint:ignore SA1019 a rule written with the top-level Prefix (by another tool) still applies to it
		out.Prefix = aws.ToString(r.Prefix)
	case f.And != nil:
		out.Prefix, out.Tagged = aws.ToString(f.And.Prefix), len(f.And.Tags) > 0
		out.Sized = f.And.ObjectSizeGreaterThan != nil || f.And.ObjectSizeLessThan != nil
	case f.Tag != nil:
		out.Tagged = true
	case f.Prefix != nil:
		out.Prefix = *f.Prefix
	}
	if f := r.Filter; f != nil && (f.ObjectSizeGreaterThan != nil || f.ObjectSizeLessThan != nil) {
		out.Sized = true
	}
	if e := r.Expiration; e != nil {
		out.ExpirationDays = int(aws.ToInt32(e.Days))
		out.ExpirationDate = aws.ToTime(e.Date)
		out.Other = aws.ToBool(e.ExpiredObjectDeleteMarker)
	}
	if a := r.AbortIncompleteMultipartUpload; a != nil {
		out.AbortIncompleteDays = int(aws.ToInt32(a.DaysAfterInitiation))
	}
	for _, t := range r.Transitions {
		out.Transitions = append(out.Transitions, lifecycle.Transition{
			Days: int(aws.ToInt32(t.Days)), Date: aws.ToTime(t.Date), StorageClass: string(t.StorageClass),
			Archive: t.StorageClass == types.TransitionStorageClassGlacier || t.StorageClass == types.TransitionStorageClassDeepArchive,
		})
	}
	if len(r.NoncurrentVersionTransitions) > 0 || r.NoncurrentVersionExpiration != nil {
		out.Other = true
	}
	return out
}

// ruleToS3 is r's Native form when it has one, else the S3 rule of its
// prefix, expiry and abort (the only fields claimcheck's own rules set).
func ruleToS3(r lifecycle.Rule) types.LifecycleRule {
	if n, ok := r.Native.(types.LifecycleRule); ok {
		return n
	}
	out := types.LifecycleRule{ID: aws.String(r.ID), Status: types.ExpirationStatusEnabled,
		Filter: &types.LifecycleRuleFilter{Prefix: aws.String(r.Prefix)}}
	if r.Disabled {
		out.Status = types.ExpirationStatusDisabled
	}
	if r.ExpirationDays > 0 {
		out.Expiration = &types.LifecycleExpiration{Days: aws.Int32(int32(r.ExpirationDays))}
	}
	if r.AbortIncompleteDays > 0 {
		out.AbortIncompleteMultipartUpload = &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(int32(r.AbortIncompleteDays))}
	}
	return out
}
