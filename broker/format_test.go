package broker_test

import (
	"errors"
	"strings"
	"testing"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	_ "github.com/claimcheck/claimcheck/broker/sqs" // sqs:// URLs
)

const sqsURL = "sqs://?queue_url=http://127.0.0.1:1/000000000000/jobs&dead_letter_queue_url=http://127.0.0.1:1/000000000000/jobs-dead&region=us-east-1"

// TestFormatOf: format=aws declares an SQS destination of AWS payload
// pointers; broker.Open takes the format parameters out before the
// transport, which refuses parameters it does not know, sees the URL.
func TestFormatOf(t *testing.T) {
	f, err := broker.FormatOf(sqsURL)
	if err != nil || f != (broker.Format{}) {
		t.Fatalf("no format: %+v %v", f, err)
	}
	f, err = broker.FormatOf(sqsURL + "&format=aws&pointer_bucket=acme-payloads&pointer_marker=SQSLargePayloadSize")
	if err != nil || !f.AWS || f.PointerBucket != "acme-payloads" || f.Marker != broker.AttrLegacyPayloadSize {
		t.Fatalf("%+v %v", f, err)
	}
	f, err = broker.FormatOf(sqsURL + "&format=aws&pointer_bucket=acme-payloads&pointer_body=s3payload")
	if err != nil || f.Body != broker.PointerBodyS3Payload || f.Marker != "" {
		t.Fatalf("pointer_body=s3payload: %+v %v", f, err)
	}
	tr, err := broker.Open(t.Context(), sqsURL+"&format=aws&pointer_bucket=acme-payloads&pointer_body=s3payload")
	if err != nil {
		t.Fatalf("Open with format parameters: %v", err)
	}
	tr.Close()
	for name, u := range map[string]string{
		"UnknownFormat":   sqsURL + "&format=xml",
		"NoBucket":        sqsURL + "&format=aws",
		"BucketAlone":     sqsURL + "&pointer_bucket=b",
		"UnknownMarker":   sqsURL + "&format=aws&pointer_bucket=b&pointer_marker=Size",
		"Twice":           sqsURL + "&format=aws&format=aws&pointer_bucket=b",
		"NotSQS":          "amqp://127.0.0.1/?queue=jobs&format=aws&pointer_bucket=b",
		"NotAURL":         "::",
		"BucketNotAName":  sqsURL + "&format=aws&pointer_bucket=" + string(make([]byte, 300)),
		"TicketAndBucket": sqsURL + "&format=ticket&pointer_bucket=b",
		"UnknownBody":     sqsURL + "&format=aws&pointer_bucket=b&pointer_body=xml",
		"BodyAlone":       sqsURL + "&pointer_body=s3payload",
		"S3PayloadLegacy": sqsURL + "&format=aws&pointer_bucket=b&pointer_body=s3payload&pointer_marker=SQSLargePayloadSize",
	} {
		if _, err := broker.FormatOf(u); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
		if name != "NotAURL" {
			if _, err := broker.Open(t.Context(), u); !errors.Is(err, claimcheck.ErrConfig) {
				t.Errorf("Open %s: %v", name, err)
			}
		}
	}
}

// TestFormatCheckStore: format=aws refuses a store that seals its payloads
// (a foreign consumer would read ciphertext) and takes one that does not;
// the ticket format takes both.
func TestFormatCheckStore(t *testing.T) {
	kek, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	sealed := brokertest.FileStore(t, &claimcheck.Options{Keeper: localsecrets.NewKeeper(kek)})
	plain := brokertest.FileStore(t, nil)
	aws, err := broker.FormatOf(sqsURL + "&format=aws&pointer_bucket=acme-payloads")
	if err != nil {
		t.Fatal(err)
	}
	if err := aws.CheckStore(sealed); !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "--keeper none") {
		t.Errorf("format=aws, sealing store: %v, want ErrConfig saying --keeper none", err)
	}
	for _, c := range []struct {
		f     broker.Format
		store *claimcheck.Store
	}{{aws, plain}, {broker.Format{}, sealed}, {broker.Format{}, plain}} {
		if err := c.f.CheckStore(c.store); err != nil {
			t.Errorf("%+v, seals %v: %v", c.f, c.store.Seals(), err)
		}
	}
}
