package sqs

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

func init() {
	broker.Register("sqs", func(ctx context.Context, u *url.URL) (broker.Transport, error) {
		t, err := OpenURL(ctx, u)
		if err != nil {
			return nil, err // not a nil *Transport in a non-nil interface
		}
		return t, nil
	})
}

// urlParams are OpenURL's query parameters.
var urlParams = []string{"queue_url", "dead_letter_queue_url", "region", "endpoint", "max_message_size", "visibility_timeout", "wait_time"}

// OpenURL opens the transport an "sqs" URL names. It is the opener
// broker.Open uses for the scheme. Two forms are accepted:
//
//	sqs://?queue_url=<queue URL>&dead_letter_queue_url=<queue URL>[&params]
//	sqs://<host>/<account>/<queue>?dead_letter_queue_url=<queue URL>[&params]
//
// The second form, such as
// "sqs://sqs.us-east-1.amazonaws.com/123456789012/jobs?dead_letter_queue_url=https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dead",
// names the queue https://<host>/<account>/<queue>; use the first form for
// a queue URL that is not https. Query values are URL-decoded, so a queue
// URL containing '&', '+', '%' or '#' must be escaped (url.QueryEscape).
// Query parameters, each at most once:
//
//   - queue_url: Options.QueueURL, an absolute http(s) URL; required unless
//     the queue is given as host and path, and refused if it also is;
//   - dead_letter_queue_url: Options.DeadLetterQueueURL, likewise; required;
//   - region: the AWS region (letters, digits and '-'), overriding the
//     configuration chain's; without it, the region of a queue URL on an
//     AWS SQS host (sqs.<region>.amazonaws.com, <region>.queue.amazonaws.com,
//     and their .amazonaws.com.cn forms), else the chain's (AWS_REGION,
//     the shared config file's profile);
//   - endpoint: the SQS endpoint, an absolute http(s) URL, for
//     SQS-compatible servers; default, for a queue URL on an AWS host, the
//     region's AWS endpoint (or AWS_ENDPOINT_URL_SQS and the like, as the
//     chain reads them), and for any other queue URL its own scheme and
//     host (an SQS-compatible server is its queues' endpoint);
//   - max_message_size: Options.MaxMessageSize, in bytes, from 1024 to
//     1048576 (default 262144); it must not exceed the queues' own
//     MaximumMessageSize (Verify checks it);
//   - visibility_timeout: Options.VisibilityTimeout, a positive Go duration
//     up to 12h, rounded up to whole seconds; default the queue's own;
//   - wait_time: Options.WaitTime, a positive Go duration up to 20s,
//     rounded up to whole seconds; default 20s.
//
// Credentials come only from the standard AWS configuration chain
// (config.LoadDefaultConfig: environment, shared files, SSO, web identity,
// container and instance roles); the URL carries none, and URLs with user
// information are refused. The queues and the dead-letter queue are not
// checked here (Open makes no request); call Verify for that.
//
// Errors: claimcheck.ErrConfig naming the parameter for an unknown or
// repeated parameter or an invalid value, for a missing queue, for user
// information, and for no region anywhere, or when the AWS configuration
// does not load (a named profile that does not exist); otherwise Open's
// errors. Values of unknown parameters and of URLs with user information
// are never quoted.
func OpenURL(ctx context.Context, u *url.URL) (*Transport, error) {
	p, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	var load []func(*config.LoadOptions) error
	if p.region != "" {
		load = append(load, config.WithRegion(p.region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("sqs: loading the AWS configuration: %w: %w", claimcheck.ErrConfig, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("sqs: no AWS region: set the URL parameter region, or AWS_REGION, or the profile's region: %w", claimcheck.ErrConfig)
	}
	endpoint := p.endpoint
	if endpoint == "" {
		if q, err := url.Parse(p.opts.QueueURL); err == nil && !strings.HasSuffix(strings.ToLower(q.Hostname()), ".amazonaws.com") &&
			!strings.HasSuffix(strings.ToLower(q.Hostname()), ".amazonaws.com.cn") {
			endpoint = q.Scheme + "://" + q.Host
		}
	}
	client := awssqs.NewFromConfig(cfg, func(o *awssqs.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	p.opts.Client = client
	return Open(ctx, p.opts)
}

// urlConfig is what parseURL reads from an sqs URL.
type urlConfig struct {
	opts     Options // without Client
	region   string  // explicit or inferred from the queue URL; "" for the chain's
	endpoint string
}

// awsHostRegion matches the hosts of AWS SQS queue URLs; the submatch is
// the region.
var awsHostRegion = regexp.MustCompile(`^(?:sqs\.([a-z0-9-]+)|([a-z0-9-]+)\.queue)\.amazonaws\.com(?:\.cn)?$`)

var validRegion = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)

// regionOf returns the region of a queue URL on an AWS SQS host, or "".
func regionOf(queueURL string) string {
	u, err := url.Parse(queueURL)
	if err != nil {
		return ""
	}
	m := awsHostRegion.FindStringSubmatch(strings.ToLower(u.Hostname()))
	if m == nil {
		return ""
	}
	return m[1] + m[2]
}

// parseURL reads an sqs URL. Its errors name the parameter and quote only
// values that cannot be secrets.
func parseURL(u *url.URL) (urlConfig, error) {
	var c urlConfig
	if u.User != nil {
		return c, fmt.Errorf("sqs: URL has user information: credentials are not accepted in the URL, they come from the AWS configuration chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, roles): %w", claimcheck.ErrConfig)
	}
	if u.Opaque != "" {
		return c, fmt.Errorf("sqs: URL is opaque (want sqs://?queue_url=...&dead_letter_queue_url=...): %w", claimcheck.ErrConfig)
	}
	if u.Fragment != "" {
		return c, fmt.Errorf("sqs: URL has a fragment ('#'): escape the query values (url.QueryEscape): %w", claimcheck.ErrConfig)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return c, fmt.Errorf("sqs: URL query does not parse: %w", claimcheck.ErrConfig)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad := func(k, v, want string) error {
		return fmt.Errorf("sqs: URL parameter %s=%q: want %s: %w", k, v, want, claimcheck.ErrConfig)
	}
	for _, k := range keys {
		vs := q[k]
		known := false
		for _, n := range urlParams {
			known = known || n == k
		}
		if !known {
			// The value is not quoted: it may be a secret put in the
			// wrong place.
			return c, fmt.Errorf("sqs: unknown URL parameter %q (known: %s; credentials come from the AWS configuration chain): %w",
				k, strings.Join(urlParams, ", "), claimcheck.ErrConfig)
		}
		if len(vs) != 1 {
			return c, fmt.Errorf("sqs: URL parameter %s given %d times: %w", k, len(vs), claimcheck.ErrConfig)
		}
		v := vs[0]
		switch k {
		case "queue_url", "dead_letter_queue_url":
			if err := checkHTTPURL(k, v, true); err != nil {
				return c, err
			}
			if k == "queue_url" {
				c.opts.QueueURL = v
			} else {
				c.opts.DeadLetterQueueURL = v
			}
		case "endpoint":
			if err := checkHTTPURL(k, v, false); err != nil {
				return c, err
			}
			c.endpoint = v
		case "region":
			if !validRegion.MatchString(v) || len(v) > 64 {
				return c, bad(k, v, "an AWS region such as us-east-1")
			}
			c.region = v
		case "max_message_size":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < MinMessageSize || n > MaxMessageSizeLimit {
				return c, bad(k, v, fmt.Sprintf("a number of bytes from %d to %d", MinMessageSize, MaxMessageSizeLimit))
			}
			c.opts.MaxMessageSize = n
		case "visibility_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > MaxVisibilityTimeout {
				return c, bad(k, v, `a positive duration up to 12h such as "90s" or "5m"`)
			}
			c.opts.VisibilityTimeout = d
		case "wait_time":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > MaxWaitTime {
				return c, bad(k, v, `a positive duration up to 20s such as "10s"`)
			}
			c.opts.WaitTime = d
		}
	}
	switch {
	case u.Host != "":
		if u.Path == "" || u.Path == "/" {
			return c, fmt.Errorf("sqs: URL names host %q but no queue path (want sqs://host/account/queue): %w", u.Host, claimcheck.ErrConfig)
		}
		if c.opts.QueueURL != "" {
			return c, fmt.Errorf("sqs: URL parameter queue_url given with a queue in the URL's host and path: give one: %w", claimcheck.ErrConfig)
		}
		c.opts.QueueURL = (&url.URL{Scheme: "https", Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
	case u.Path != "" && u.Path != "/":
		return c, fmt.Errorf("sqs: URL has a path but no host (want sqs://?queue_url=... or sqs://host/account/queue): %w", claimcheck.ErrConfig)
	case c.opts.QueueURL == "":
		return c, fmt.Errorf("sqs: missing URL parameter queue_url (or the queue as sqs://host/account/queue): %w", claimcheck.ErrConfig)
	}
	if c.opts.DeadLetterQueueURL == "" {
		return c, fmt.Errorf("sqs: missing URL parameter dead_letter_queue_url: %w", claimcheck.ErrConfig)
	}
	if c.region == "" {
		c.region = regionOf(c.opts.QueueURL)
	}
	return c, nil
}

// checkHTTPURL checks that v is an absolute http(s) URL without user
// information, query or fragment and, if queue, with a path.
func checkHTTPURL(k, v string, queue bool) error {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("sqs: URL parameter %s does not parse as a URL: %w", k, claimcheck.ErrConfig)
	}
	if u.User != nil {
		return fmt.Errorf("sqs: URL parameter %s has user information: credentials are not accepted in the URL: %w", k, claimcheck.ErrConfig)
	}
	want := "an absolute http(s) URL without query or fragment"
	if queue {
		want = "an absolute http(s) queue URL such as https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" ||
		(queue && (u.Path == "" || u.Path == "/")) {
		return fmt.Errorf("sqs: URL parameter %s=%q: want %s: %w", k, v, want, claimcheck.ErrConfig)
	}
	return nil
}
