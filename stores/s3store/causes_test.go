package s3store

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/claimcheck/claimcheck"
)

// TestS3CausesNamed: the S3 answers SeaweedFS cannot give (it has neither
// regions nor archive tiers) are built here as the SDK returns them, a
// stand-in for AWS named as such, and must come out with their cause named
// and never as a missing object: a wrong region (the 301 of a HEAD, with
// the bucket's region in its header, and AuthorizationHeaderMalformed), an
// archived object (InvalidObjectState, ObjectNotInActiveTierError). The
// missing bucket and missing path-style addressing are tested on SeaweedFS
// (TestStartupBucketChecks, TestBucketRemovedJobsWait).
func TestS3CausesNamed(t *testing.T) {
	c := &s3Causes{bucket: "jobs", region: "us-east-1", endpoint: ""}
	resp := func(status int, header http.Header) *smithyhttp.ResponseError {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: header}}, Err: errors.New("x")}
	}
	api := func(code, msg string, status int) error {
		re := resp(status, http.Header{})
		re.Err = &smithy.GenericAPIError{Code: code, Message: msg}
		return re
	}
	for _, tc := range []struct {
		name  string
		err   error
		cause error
		want  string
	}{
		{"HEAD301", resp(http.StatusMovedPermanently, http.Header{"X-Amz-Bucket-Region": {"eu-west-1"}}), claimcheck.ErrWrongRegion, "the bucket is in eu-west-1: set region=eu-west-1 in the store URL"},
		{"AuthorizationHeaderMalformed", api("AuthorizationHeaderMalformed", "the region 'us-east-1' is wrong; expecting 'eu-west-1'", 400), claimcheck.ErrWrongRegion, "expecting 'eu-west-1'"},
		{"PermanentRedirect", api("PermanentRedirect", "The bucket you are attempting to access must be addressed using the specified endpoint.", 301), claimcheck.ErrWrongRegion, "fix region= or endpoint="},
		{"InvalidObjectState", api("InvalidObjectState", "The operation is not valid for the object's storage class", 403), claimcheck.ErrArchived, "archive storage class (InvalidObjectState)"},
		{"ObjectNotInActiveTierError", api("ObjectNotInActiveTierError", "", 403), claimcheck.ErrArchived, "restored"},
		{"NoSuchBucket", api("NoSuchBucket", "The specified bucket does not exist", 404), claimcheck.ErrNoBucket, `bucket "jobs" does not exist at AWS S3`},
		{"no credentials (identity resolver)", &smithy.OperationError{ServiceID: "S3", OperationName: "ListObjectsV2", Err: errors.New("get identity: get credentials: failed to refresh cached credentials, no EC2 IMDS role found")}, claimcheck.ErrNoCredentials, "AWS_ACCESS_KEY_ID"},
		{"no credentials", &smithy.OperationError{ServiceID: "S3", OperationName: "HeadBucket", Err: &v4.SigningError{Err: errors.New("failed to retrieve credentials: no EC2 IMDS role found")}}, claimcheck.ErrNoCredentials, "no AWS credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.name(tc.err, false)
			why, cause := claimcheck.CauseOf(err)
			if cause != tc.cause || !strings.Contains(why, tc.want) {
				t.Fatalf("cause %v %q, want %v containing %q", cause, why, tc.cause, tc.want)
			}
			// s3blob's ErrorCode reads the outermost smithy.APIError's code:
			// none of those it takes for a missing object.
			var ae smithy.APIError
			if !errors.As(err, &ae) {
				t.Fatal("no smithy.APIError")
			}
			switch ae.ErrorCode() {
			case "NoSuchBucket", "NoSuchKey", "NotFound", "ObjectNotInActiveTierError":
				t.Errorf("code %s: s3blob reads it as a missing object", ae.ErrorCode())
			}
		})
	}
}
