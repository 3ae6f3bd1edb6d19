package s3store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/claimcheck/claimcheck"
)

// s3Causes names the cause of the errors of one bucket's client whose
// cause is the bucket's state or the store URL (a missing bucket, another
// region, an archived object, virtual-host addressing where the server
// wants path-style): a client middleware, so that every call through the
// store's client is covered. It knows the URL's bucket, region, endpoint
// and addressing for its messages.
type s3Causes struct {
	bucket, region, endpoint string
	pathStyle                bool
}

// s3Cause is an S3 error with its cause named (claimcheck.StoreCauseError).
// As a smithy.APIError its code is code, not the server's, so that
// gcerrors (s3blob's ErrorCode) does not read NoSuchBucket or an archived
// object as a missing one; the server's code is in ErrorMessage and the
// description.
type s3Cause struct {
	err   error
	code  string
	cause error
	desc  string
}

func (e *s3Cause) Error() string                          { return e.desc + ": " + e.err.Error() }
func (e *s3Cause) Unwrap() error                          { return e.err }
func (e *s3Cause) ErrorCode() string                      { return e.code }
func (e *s3Cause) ErrorMessage() string                   { return e.desc }
func (e *s3Cause) ErrorFault() smithy.ErrorFault          { return smithy.FaultClient }
func (e *s3Cause) StoreCause() (desc string, cause error) { return e.desc, e.cause }
func (c *s3Causes) where() string {
	if c.endpoint == "" {
		return "AWS S3"
	}
	return "endpoint " + c.endpoint
}

func (c *s3Causes) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("claimcheck.S3Causes",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if err != nil {
				_, headBucket := in.Parameters.(*s3.HeadBucketInput)
				err = c.name(err, headBucket)
			}
			return out, md, err
		}), middleware.Before)
}

// name returns err with its cause named, or err as it is.
func (c *s3Causes) name(err error, headBucket bool) error {
	var sc *s3Cause
	if errors.As(err, &sc) {
		return err
	}
	var code string
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	status := 0
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var dns *net.DNSError
	var signing *v4.SigningError
	switch {
	case errors.As(err, &signing) && strings.Contains(signing.Error(), "credentials") ||
		strings.Contains(err.Error(), "get identity: get credentials:"): // the SDK's auth resolver (service/s3/auth.go) wraps no type
		return &s3Cause{err: err, code: "ClaimcheckNoCredentials", cause: claimcheck.ErrNoCredentials, desc: fmt.Sprintf(
			"no AWS credentials to sign requests to bucket %q at %s: none in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, the shared files (~/.aws/credentials, AWS_PROFILE) or an instance role: set them where this command runs", c.bucket, c.where())}
	case errors.As(err, &dns) && !c.pathStyle && c.endpoint != "" && strings.HasPrefix(strings.ToLower(dns.Name), strings.ToLower(c.bucket)+"."):
		return &s3Cause{err: err, cause: claimcheck.ErrDNS, desc: fmt.Sprintf(
			"DNS failure: cannot resolve %s: the store URL addresses bucket %q virtual-host style (BUCKET.HOST of %s), which S3-compatible servers rarely serve: add use_path_style=true to the store URL",
			dns.Name, c.bucket, c.where())}
	case code == "NoSuchBucket" || headBucket && (status == http.StatusNotFound || code == "NotFound"):
		desc := fmt.Sprintf("bucket %q does not exist at %s (NoSuchBucket): create it, or fix the bucket in the store URL", c.bucket, c.where())
		if !c.pathStyle && c.endpoint != "" {
			desc += "; the URL addresses it virtual-host style: an S3-compatible server usually needs use_path_style=true"
		}
		return &s3Cause{err: err, code: "ClaimcheckNoSuchBucket", cause: claimcheck.ErrNoBucket, desc: desc}
	case code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" || code == "IllegalLocationConstraintException" || status == http.StatusMovedPermanently:
		desc := fmt.Sprintf("bucket %q is not served in region %s at %s", c.bucket, c.region, c.where())
		if code != "" {
			desc += " (" + code + ")"
		}
		if re != nil && re.Response != nil {
			if r := re.Response.Header.Get("X-Amz-Bucket-Region"); r != "" && r != c.region {
				desc += fmt.Sprintf(": the bucket is in %s: set region=%s in the store URL", r, r)
				return &s3Cause{err: err, code: "ClaimcheckWrongRegion", cause: claimcheck.ErrWrongRegion, desc: desc}
			}
		}
		if ae != nil && ae.ErrorMessage() != "" {
			desc += ": " + ae.ErrorMessage()
		}
		desc += ": fix region= or endpoint= in the store URL"
		return &s3Cause{err: err, code: "ClaimcheckWrongRegion", cause: claimcheck.ErrWrongRegion, desc: desc}
	case code == "InvalidObjectState" || code == "ObjectNotInActiveTierError":
		return &s3Cause{err: err, code: "ClaimcheckArchived", cause: claimcheck.ErrArchived, desc: fmt.Sprintf(
			"the object is in an archive storage class (%s): it exists, and a claim can read it once it is restored (S3 RestoreObject); a lifecycle rule moving payloads/ or results/ to an archive tier sooner than the retention (claimcheck retention) causes this", code)}
	}
	return err
}

// CheckBucket implements claimcheck.BucketChecker with a HeadBucket: nil
// when the bucket is there and answers in the URL's region, else the
// error with its cause named (s3Causes).
func (h *hooks) CheckBucket(ctx context.Context) error {
	client := h.client()
	if client == nil {
		return nil
	}
	_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(h.name)})
	return err
}
