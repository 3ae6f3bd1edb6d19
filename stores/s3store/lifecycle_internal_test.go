package s3store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/claimcheck/claimcheck/lifecycle"
)

// TestLifecycleRuleConversion: each kind of S3 rule reads as the
// lifecycle.Rule that Merge and doctor judge by, and a rule read is
// written back exactly as it was, whatever fields it uses.
func TestLifecycleRuleConversion(t *testing.T) {
	t.Parallel()
	date := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	enabled := types.ExpirationStatusEnabled
	for _, tc := range []struct {
		name string
		in   types.LifecycleRule
		want lifecycle.Rule
	}{
		{"prefix and expiry", types.LifecycleRule{ID: aws.String("a"), Status: enabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("payloads/")}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(7)},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(2)}},
			lifecycle.Rule{ID: "a", Prefix: "payloads/", ExpirationDays: 7, AbortIncompleteDays: 2}},
		{"disabled", types.LifecycleRule{ID: aws.String("off"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}},
			lifecycle.Rule{ID: "off", Disabled: true}},
		{"empty filter", types.LifecycleRule{Status: enabled, Filter: &types.LifecycleRuleFilter{}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
			lifecycle.Rule{ExpirationDays: 1}},
		{"size filter", types.LifecycleRule{ID: aws.String("big"), Status: enabled, Filter: &types.LifecycleRuleFilter{ObjectSizeGreaterThan: aws.Int64(1 << 20)}, Expiration: &types.LifecycleExpiration{Days: aws.Int32(2)}},
			lifecycle.Rule{ID: "big", Sized: true, ExpirationDays: 2}},
		{"tag filter", types.LifecycleRule{ID: aws.String("t"), Status: enabled, Filter: &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("tmp"), Value: aws.String("1")}}},
			lifecycle.Rule{ID: "t", Tagged: true}},
		{"and with tags and size", types.LifecycleRule{ID: aws.String("and"), Status: enabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{Prefix: aws.String("x/"), Tags: []types.Tag{{Key: aws.String("k")}}, ObjectSizeLessThan: aws.Int64(9)}}},
			lifecycle.Rule{ID: "and", Prefix: "x/", Tagged: true, Sized: true}},
		//lint:ignore SA1019 the test writes a rule as older tools did, with the top-level Prefix
		{"the deprecated top-level prefix", types.LifecycleRule{ID: aws.String("legacy"), Status: enabled, Prefix: aws.String("results/"), Expiration: &types.LifecycleExpiration{Days: aws.Int32(5)}},
			lifecycle.Rule{ID: "legacy", Prefix: "results/", ExpirationDays: 5}},
		{"fixed date", types.LifecycleRule{ID: aws.String("eoy"), Status: enabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}, Expiration: &types.LifecycleExpiration{Date: &date}},
			lifecycle.Rule{ID: "eoy", ExpirationDate: date}},
		{"transitions", types.LifecycleRule{ID: aws.String("cold"), Status: enabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Transitions: []types.Transition{{Days: aws.Int32(10), StorageClass: types.TransitionStorageClassDeepArchive}, {Days: aws.Int32(1), StorageClass: types.TransitionStorageClassGlacierIr}, {Date: &date, StorageClass: types.TransitionStorageClassGlacier}}},
			lifecycle.Rule{ID: "cold", Transitions: []lifecycle.Transition{{Days: 10, StorageClass: "DEEP_ARCHIVE", Archive: true}, {Days: 1, StorageClass: "GLACIER_IR"}, {Date: date, StorageClass: "GLACIER", Archive: true}}}},
		{"noncurrent versions", types.LifecycleRule{ID: aws.String("nc"), Status: enabled, Filter: &types.LifecycleRuleFilter{}, NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(2)}},
			lifecycle.Rule{ID: "nc", Other: true}},
		{"delete markers", types.LifecycleRule{ID: aws.String("dm"), Status: enabled, Filter: &types.LifecycleRuleFilter{}, Expiration: &types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)}},
			lifecycle.Rule{ID: "dm", Other: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ruleFromS3(tc.in)
			if !reflect.DeepEqual(got.Native, tc.in) {
				t.Errorf("Native = %+v, want the rule read", got.Native)
			}
			got.Native = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ruleFromS3 = %+v, want %+v", got, tc.want)
			}
			if back := ruleToS3(ruleFromS3(tc.in)); !reflect.DeepEqual(back, tc.in) {
				t.Errorf("written back as %+v, want %+v", back, tc.in)
			}
		})
	}
}

// TestLifecycleRuleOfOurs: a rule of ours (no native form) is written as
// S3's prefix filter, expiry and abort, and reads back as itself.
func TestLifecycleRuleOfOurs(t *testing.T) {
	t.Parallel()
	ours, err := lifecycle.Policy{PayloadDays: 22, ResultDays: 52}.Rules()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ours {
		s := ruleToS3(r)
		if s.Status != types.ExpirationStatusEnabled || aws.ToString(s.Filter.Prefix) != r.Prefix ||
			aws.ToInt32(s.Expiration.Days) != int32(r.ExpirationDays) || aws.ToInt32(s.AbortIncompleteMultipartUpload.DaysAfterInitiation) != 1 {
			t.Errorf("%s as S3: %+v", r.ID, s)
		}
		back := ruleFromS3(s)
		back.Native = nil
		if !reflect.DeepEqual(back, r) {
			t.Errorf("read back as %+v, want %+v", back, r)
		}
	}
}

// fakeLifecycleAPI answers every lifecycle request with err: a fake, since
// the test server grants every permission and cannot be made to refuse.
type fakeLifecycleAPI struct{ err error }

func (f fakeLifecycleAPI) GetBucketLifecycleConfiguration(context.Context, *s3.GetBucketLifecycleConfigurationInput, ...func(*s3.Options)) (*s3.GetBucketLifecycleConfigurationOutput, error) {
	return nil, f.err
}

func (f fakeLifecycleAPI) PutBucketLifecycleConfiguration(context.Context, *s3.PutBucketLifecycleConfigurationInput, ...func(*s3.Options)) (*s3.PutBucketLifecycleConfigurationOutput, error) {
	return nil, f.err
}

// TestLifecycleErrorsWithFakeClient: no configuration is an empty one,
// S3's error codes become *lifecycle.StoreError naming the permission an
// access denied lacks, and other errors are wrapped as they are.
func TestLifecycleErrorsWithFakeClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := NewLifecycleManager(fakeLifecycleAPI{&smithy.GenericAPIError{Code: "NoSuchLifecycleConfiguration"}}, "b").ReadLifecycle(ctx, "")
	if err != nil || c.Found || len(c.Rules) != 0 {
		t.Errorf("no configuration: %+v, %v", c, err)
	}
	denied := NewLifecycleManager(fakeLifecycleAPI{&smithy.GenericAPIError{Code: "AccessDenied"}}, "b")
	_, err = denied.ReadLifecycle(ctx, "")
	var se *lifecycle.StoreError
	if !errors.As(err, &se) || se.Text() != "ACCESS DENIED (allow s3:GetLifecycleConfiguration)" || se.Bucket != "b" {
		t.Errorf("read refused: %v", err)
	}
	err = denied.WriteLifecycle(ctx, &lifecycle.Configuration{}, "")
	if !errors.As(err, &se) || se.Text() != "ACCESS DENIED (allow s3:PutLifecycleConfiguration)" || se.Op != "put" {
		t.Errorf("write refused: %v", err)
	}
	_, err = NewLifecycleManager(fakeLifecycleAPI{&smithy.GenericAPIError{Code: "NoSuchBucket"}}, "b").ReadLifecycle(ctx, "")
	if !errors.As(err, &se) || se.Text() != "NoSuchBucket" || se.Permission != "" {
		t.Errorf("no bucket: %v", err)
	}
	cut := errors.New("connection reset")
	_, err = NewLifecycleManager(fakeLifecycleAPI{cut}, "b").ReadLifecycle(ctx, "")
	if errors.As(err, &se) || !errors.Is(err, cut) {
		t.Errorf("network error: %v", err)
	}
}
