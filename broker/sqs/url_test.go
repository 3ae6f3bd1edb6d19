package sqs

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
)

const (
	testAccessKey = "AKIDSTANDINURL"
	testSecretKey = "standin-url-secret-5f1c"
)

// isolateAWSEnv points the AWS configuration chain at static credentials
// in the environment only: no shared files, profile or endpoint overrides
// from the machine running the test.
func isolateAWSEnv(t *testing.T, region string) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           testAccessKey,
		"AWS_SECRET_ACCESS_KEY":       testSecretKey,
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  region,
		"AWS_DEFAULT_REGION":          "",
		"AWS_PROFILE":                 "",
		"AWS_DEFAULT_PROFILE":         "",
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_SQS":        "",
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
}

func sqsURL(q url.Values) string { return "sqs://?" + q.Encode() }

// broker.Open("sqs://...") against the stand-in: credentials from the
// environment, the URL's region overriding AWS_REGION, options from the
// URL, and a message round trip with every attribute (AttrID included)
// unchanged.
func TestOpenURLAgainstStandIn(t *testing.T) {
	isolateAWSEnv(t, "eu-west-1")
	s := newStandInSQS(t)
	q, dlq := s.createQueue("url-jobs", 0), s.createQueue("url-jobs-dead", 0)
	ctx := t.Context()
	bt, err := broker.Open(ctx, sqsURL(url.Values{
		"queue_url": {q}, "dead_letter_queue_url": {dlq}, "endpoint": {s.srv.URL}, "region": {"us-east-1"},
		"max_message_size": {"131072"}, "visibility_timeout": {"45s"}, "wait_time": {"2s"},
	}))
	if err != nil {
		t.Fatalf("broker.Open: %v", err)
	}
	t.Cleanup(func() { bt.Close() })
	tr, ok := bt.(*Transport)
	if !ok {
		t.Fatalf("broker.Open returned %T", bt)
	}
	o := tr.Options()
	if o.QueueURL != q || o.DeadLetterQueueURL != dlq || o.MaxMessageSize != 131072 || o.VisibilityTimeout != 45*time.Second || o.WaitTime != 2*time.Second {
		t.Errorf("options from the URL: %+v", o)
	}
	if tr.FIFO() {
		t.Errorf("standard queue taken for FIFO")
	}
	attrs := map[string]string{
		broker.AttrID: "cc-0123456789abcdef0123456789abcdef", broker.AttrKind: "thumbnail", broker.AttrTenant: "acme",
		broker.AttrJob: "42",
	}
	if err := tr.Publish(ctx, []broker.Message{{Body: []byte(`{"via":"url"}`), Attributes: attrs}}); err != nil {
		t.Fatal(err)
	}
	ds, err := tr.Receive(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || string(ds[0].Body) != `{"via":"url"}` || ds[0].Attempt != 1 || ds[0].ID == "" {
		t.Fatalf("received %+v", ds)
	}
	if len(ds[0].Attributes) != len(attrs) {
		t.Errorf("attributes %v, want %v", ds[0].Attributes, attrs)
	}
	for k, v := range attrs {
		if ds[0].Attributes[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, ds[0].Attributes[k], v)
		}
	}
	if err := tr.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	if v, f := s.count(q); v+f != 0 {
		t.Errorf("%d messages left after Ack", v+f)
	}
	scopes := s.credentialScopes()
	if len(scopes) == 0 {
		t.Fatal("no signed request reached the stand-in")
	}
	for _, sc := range scopes {
		if !strings.HasPrefix(sc, testAccessKey+"/") || !strings.Contains(sc, "/us-east-1/sqs/") {
			t.Errorf("request signed with credential %q, want %s/…/us-east-1/sqs/…", sc, testAccessKey)
		}
	}
}

// Without region=, the region comes from the chain (AWS_REGION) for a
// queue URL that is not on an AWS host.
func TestOpenURLRegionFromEnvAgainstStandIn(t *testing.T) {
	isolateAWSEnv(t, "eu-central-1")
	s := newStandInSQS(t)
	q, dlq := s.createQueue("env-jobs", 0), s.createQueue("env-jobs-dead", 0)
	bt, err := broker.Open(t.Context(), sqsURL(url.Values{"queue_url": {q}, "dead_letter_queue_url": {dlq}, "endpoint": {s.srv.URL}, "wait_time": {"1s"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	if err := bt.Publish(t.Context(), []broker.Message{{Body: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if sc := s.credentialScopes(); len(sc) != 1 || !strings.Contains(sc[0], "/eu-central-1/sqs/") {
		t.Errorf("credential scopes %v, want eu-central-1", sc)
	}
}

// The host form names an https queue URL; the region of an AWS queue
// host wins over AWS_REGION; region= wins over both. No request is made.
func TestOpenURLHostForm(t *testing.T) {
	isolateAWSEnv(t, "eu-west-1")
	dead := url.QueryEscape("https://sqs.eu-west-2.amazonaws.com/123456789012/jobs-dead")
	for _, c := range []struct{ raw, queue, region string }{
		{"sqs://sqs.eu-west-2.amazonaws.com/123456789012/jobs?dead_letter_queue_url=" + dead,
			"https://sqs.eu-west-2.amazonaws.com/123456789012/jobs", "eu-west-2"},
		{"sqs://sqs.eu-west-2.amazonaws.com/123456789012/jobs?region=ap-south-1&dead_letter_queue_url=" + dead,
			"https://sqs.eu-west-2.amazonaws.com/123456789012/jobs", "ap-south-1"},
		{"sqs://?queue_url=" + url.QueryEscape("https://us-west-1.queue.amazonaws.com/123456789012/jobs") + "&dead_letter_queue_url=" + dead,
			"https://us-west-1.queue.amazonaws.com/123456789012/jobs", "us-west-1"},
		{"sqs://localhost:9324/000000000000/jobs?dead_letter_queue_url=" + dead,
			"https://localhost:9324/000000000000/jobs", "eu-west-1"},
		// Unescaped query values parse too when they hold no '&', '+', '%' or '#'.
		{"sqs://?queue_url=http://127.0.0.1:9324/000000000000/jobs&dead_letter_queue_url=http://127.0.0.1:9324/000000000000/dead",
			"http://127.0.0.1:9324/000000000000/jobs", "eu-west-1"},
	} {
		bt, err := broker.Open(t.Context(), c.raw)
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		tr := bt.(*Transport)
		if tr.QueueURL() != c.queue || tr.c.Options().Region != c.region {
			t.Errorf("%s: queue %s region %s, want %s %s", c.raw, tr.QueueURL(), tr.c.Options().Region, c.queue, c.region)
		}
		bt.Close()
	}
}

// Bad URLs are ErrConfig naming the parameter, and never echo what might
// be a secret.
func TestOpenURLErrors(t *testing.T) {
	isolateAWSEnv(t, "us-east-1")
	const secret = "s3cret-9d2e"
	q := url.QueryEscape("https://sqs.us-east-1.amazonaws.com/123456789012/jobs")
	dlq := url.QueryEscape("https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dead")
	base := "queue_url=" + q + "&dead_letter_queue_url=" + dlq
	for _, c := range []struct{ raw, name string }{
		{"sqs://?dead_letter_queue_url=" + dlq, "queue_url"},
		{"sqs://", "queue_url"},
		{"sqs://?queue_url=" + q, "dead_letter_queue_url"},
		{"sqs://?" + base + "&secret_access_key=" + secret, "secret_access_key"},
		{"sqs://?" + base + "&bogus=1", "bogus"},
		{"sqs://?" + base + "&queue_url=" + q, "queue_url"},
		{"sqs://?" + base + "&visibility_timeout=soon", "visibility_timeout"},
		{"sqs://?" + base + "&visibility_timeout=30", "visibility_timeout"},
		{"sqs://?" + base + "&visibility_timeout=0s", "visibility_timeout"},
		{"sqs://?" + base + "&visibility_timeout=13h", "visibility_timeout"},
		{"sqs://?" + base + "&wait_time=1fortnight", "wait_time"},
		{"sqs://?" + base + "&wait_time=21s", "wait_time"},
		{"sqs://?" + base + "&wait_time=-1s", "wait_time"},
		{"sqs://?" + base + "&max_message_size=1k", "max_message_size"},
		{"sqs://?" + base + "&max_message_size=1023", "max_message_size"},
		{"sqs://?" + base + "&max_message_size=1048577", "max_message_size"},
		{"sqs://?" + base + "&region=", "region"},
		{"sqs://?" + base + "&region=US_EAST", "region"},
		{"sqs://?" + base + "&endpoint=localhost:9324", "endpoint"},
		{"sqs://?" + base + "&endpoint=ftp%3A%2F%2Fh", "endpoint"},
		{"sqs://?" + base + "&endpoint=" + url.QueryEscape("http://AKID:"+secret+"@h:9324"), "endpoint"},
		{"sqs://?queue_url=jobs&dead_letter_queue_url=" + dlq, "queue_url"},
		{"sqs://?queue_url=" + url.QueryEscape("https://h/") + "&dead_letter_queue_url=" + dlq, "queue_url"},
		{"sqs://?queue_url=" + url.QueryEscape("https://AKID:"+secret+"@h/1/q") + "&dead_letter_queue_url=" + dlq, "queue_url"},
		{"sqs://?queue_url=" + q + "&dead_letter_queue_url=" + url.QueryEscape("https://h/1/q?x=1"), "dead_letter_queue_url"},
		{"sqs://?queue_url=" + q + "&dead_letter_queue_url=" + q, "dead-letter queue"},
		{"sqs://?queue_url=" + q + "&dead_letter_queue_url=" + url.QueryEscape("https://sqs.us-east-1.amazonaws.com/123456789012/dead.fifo"), "FIFO"},
		{"sqs://sqs.us-east-1.amazonaws.com/1/jobs?" + base, "queue_url"},
		{"sqs://sqs.us-east-1.amazonaws.com/?dead_letter_queue_url=" + dlq, "path"},
		{"sqs:///1/jobs?dead_letter_queue_url=" + dlq, "path"},
		{"sqs://AKID:" + secret + "@sqs.us-east-1.amazonaws.com/1/jobs?dead_letter_queue_url=" + dlq, "user information"},
		{"sqs:jobs?dead_letter_queue_url=" + dlq, "opaque"},
		{"sqs://?" + base + "#frag", "fragment"},
		{"sqs://?" + base + ";x=1", "query"},
	} {
		bt, err := broker.Open(t.Context(), c.raw)
		if err == nil {
			bt.Close()
		}
		if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v, want ErrConfig naming %s", c.raw, err, c.name)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %q contains the secret", c.raw, err)
		}
	}
}

// No region anywhere: ErrConfig at open, not a failure at the first
// request.
func TestOpenURLNoRegion(t *testing.T) {
	isolateAWSEnv(t, "")
	_, err := broker.Open(t.Context(), sqsURL(url.Values{
		"queue_url": {"http://127.0.0.1:9324/000000000000/jobs"}, "dead_letter_queue_url": {"http://127.0.0.1:9324/000000000000/dead"},
	}))
	if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "region") {
		t.Errorf("no region: %v, want ErrConfig naming region", err)
	}
	// A named profile that does not exist fails the configuration load.
	t.Setenv("AWS_PROFILE", "no-such-profile")
	_, err = broker.Open(t.Context(), sqsURL(url.Values{
		"queue_url": {"http://127.0.0.1:9324/000000000000/jobs"}, "dead_letter_queue_url": {"http://127.0.0.1:9324/000000000000/dead"}, "region": {"us-east-1"},
	}))
	if !errors.Is(err, claimcheck.ErrConfig) {
		t.Errorf("missing profile: %v, want ErrConfig", err)
	}
}

func TestRegionOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://sqs.us-east-1.amazonaws.com/1/q":        "us-east-1",
		"https://SQS.EU-WEST-3.amazonaws.com/1/q":        "eu-west-3",
		"https://eu-west-1.queue.amazonaws.com/1/q":      "eu-west-1",
		"https://sqs.cn-north-1.amazonaws.com.cn/1/q":    "cn-north-1",
		"https://queue.amazonaws.com/1/q":                "",
		"http://127.0.0.1:9324/000000000000/q":           "",
		"https://sqs.us-east-1.amazonaws.com.evil.net/q": "",
		"https://sqs-fips.us-east-1.amazonaws.com/1/q":   "",
	} {
		if got := regionOf(in); got != want {
			t.Errorf("regionOf(%s) = %q, want %q", in, got, want)
		}
	}
}

// A queue URL on a host that is not AWS's is its own endpoint: no
// endpoint= needed for an SQS-compatible server (requests would otherwise
// go to the region's AWS endpoint).
func TestOpenURLEndpointFromQueueURL(t *testing.T) {
	isolateAWSEnv(t, "us-east-1")
	s := newStandInSQS(t)
	q, dlq := s.createQueue("self-jobs", 0), s.createQueue("self-jobs-dead", 0)
	bt, err := broker.Open(t.Context(), sqsURL(url.Values{"queue_url": {q}, "dead_letter_queue_url": {dlq}, "wait_time": {"1s"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := bt.Publish(ctx, []broker.Message{{Body: []byte("x")}}); err != nil {
		t.Fatalf("publish without endpoint=: %v", err)
	}
}
