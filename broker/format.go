package broker

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/claimcheck/claimcheck"
)

// Format is how a destination's messages are encoded, declared on its
// broker URL (FormatOf): claimcheck tickets (the default), or AWS payload
// pointers for consumers that run an AWS extended client.
type Format struct {
	// AWS: the relay publishes each entry as an AWS payload-offloading
	// pointer to a per-message copy of its payload (NewPointer), which
	// the AWS extended clients and sns-sqs-big-payload (in its
	// extendedLibraryCompatibility mode, with the legacy Marker) read,
	// instead of a ticket. URL parameter format=aws; SQS URLs only.
	AWS bool
	// PointerBucket is the bucket the pointers name: the store's S3
	// bucket, as the AWS consumers name it. URL parameter pointer_bucket,
	// required with format=aws.
	PointerBucket string
	// Marker is the pointers' size attribute (Pointer.Marker):
	// AttrPayloadSize (default) or AttrLegacyPayloadSize. URL parameter
	// pointer_marker.
	Marker string
	// Body is the pointers' body form (Pointer.Body): PointerBodyAWS
	// (default) or PointerBodyS3Payload, for sns-sqs-big-payload consumers
	// in its default mode. URL parameter pointer_body.
	Body string
}

// CheckStore refuses a destination format store cannot feed: format=aws
// with a store that seals its payloads (claimcheck.Store.Seals), whose
// bytes a consumer outside claimcheck would read as ciphertext. Checked
// before anything is enqueued for such a destination, rather than each
// entry dying not-relayable at the relay.
//
// Errors: claimcheck.ErrConfig, saying what to change.
func (f Format) CheckStore(store *claimcheck.Store) error {
	if f.AWS && store != nil && store.Seals() {
		return fmt.Errorf("broker: format=aws hands payloads to consumers outside claimcheck, which cannot unwrap sealed payloads: run this deployment without a keeper (--keeper none) and encrypt at rest with the bucket's own encryption (S3 SSE): %w", claimcheck.ErrConfig)
	}
	return nil
}

// formatParams are the broker URL parameters Format reads; Open removes
// them before a transport's opener sees the URL.
var formatParams = []string{"format", "pointer_bucket", "pointer_marker", "pointer_body"}

// FormatOf reads the destination format a broker URL declares: its
// parameters format (ticket or aws), pointer_bucket, pointer_marker
// (ExtendedPayloadSize or SQSLargePayloadSize) and pointer_body (aws or
// s3payload), each at most once.
//
// Errors (ErrConfig): a URL that does not parse, a repeated parameter, an
// unknown format or marker, format=aws on a scheme other than sqs or
// without pointer_bucket, pointer_bucket or pointer_marker without
// format=aws.
func FormatOf(rawURL string) (Format, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return Format{}, fmt.Errorf("broker: %q is not a broker URL: %w", RedactURL(rawURL), claimcheck.ErrConfig)
	}
	return formatOf(u)
}

func formatOf(u *url.URL) (Format, error) {
	bad := func(format string, args ...any) (Format, error) {
		return Format{}, fmt.Errorf("broker: "+format+": %w", append(args, claimcheck.ErrConfig)...)
	}
	q := u.Query()
	for _, name := range formatParams {
		if len(q[name]) > 1 {
			return bad("parameter %s given %d times", name, len(q[name]))
		}
	}
	var f Format
	switch q.Get("format") {
	case "", "ticket":
	case "aws":
		f.AWS = true
	default:
		return bad("format=%q: use ticket (the default) or aws", truncate(q.Get("format"), 20))
	}
	f.PointerBucket, f.Marker, f.Body = q.Get("pointer_bucket"), q.Get("pointer_marker"), q.Get("pointer_body")
	switch f.Body {
	case "", PointerBodyAWS:
	case PointerBodyS3Payload:
		if f.Marker == AttrLegacyPayloadSize {
			return bad("pointer_body=%s goes with the default pointer_marker (%s), not %s", PointerBodyS3Payload, AttrPayloadSize, AttrLegacyPayloadSize)
		}
	default:
		return bad("pointer_body=%q: use %s (the default) or %s", truncate(f.Body, 20), PointerBodyAWS, PointerBodyS3Payload)
	}
	switch f.Marker {
	case "", AttrPayloadSize, AttrLegacyPayloadSize:
	default:
		return bad("pointer_marker=%q: use %s (the default) or %s", truncate(f.Marker, 40), AttrPayloadSize, AttrLegacyPayloadSize)
	}
	switch {
	case !f.AWS && (f.PointerBucket != "" || f.Marker != "" || f.Body != ""):
		return bad("pointer_bucket, pointer_marker and pointer_body go with format=aws")
	case f.AWS && !strings.EqualFold(u.Scheme, "sqs"):
		return bad("format=aws is for SQS destinations (sqs://), not %s", u.Scheme)
	case f.AWS && f.PointerBucket == "":
		return bad("format=aws needs pointer_bucket, the store's bucket as the AWS consumers name it")
	case f.AWS:
		if err := checkLocation(f.PointerBucket, "k"); err != nil {
			return bad("pointer_bucket is not a bucket name")
		}
	}
	return f, nil
}

// takeFormat checks u's format parameters and removes them, so the
// transport's opener, which does not know them, sees the rest.
func takeFormat(u *url.URL) error {
	if _, err := formatOf(u); err != nil {
		return err
	}
	q := u.Query()
	found := false
	for _, name := range formatParams {
		if q.Has(name) {
			q.Del(name)
			found = true
		}
	}
	if found {
		u.RawQuery = q.Encode()
	}
	return nil
}
