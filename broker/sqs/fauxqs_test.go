package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/internal/testenv"
)

// FauxqsEndpointEnv names the environment variable holding the endpoint of
// fauxqs, an SQS emulator speaking SQS's JSON protocol (scripts/fauxqs.sh
// env prints it). Unlike the stand-in, fauxqs was written by others
// against SQS's documentation: the suite passing on both checks the
// transport against more than its authors' own reading of SQS.
const FauxqsEndpointEnv = "CLAIMCHECK_TEST_SQS_ENDPOINT"

// fauxqsClient is a real SDK client on fauxqs (which accepts any
// credentials).
func fauxqsClient(t *testing.T) *awssqs.Client {
	endpoint := testenv.Require(t, FauxqsEndpointEnv, `scripts/fauxqs.sh build && scripts/fauxqs.sh start && eval "$(scripts/fauxqs.sh env)"`)
	return awssqs.New(awssqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("fauxqs", "fauxqs", ""),
	})
}

// openFauxqs creates a queue and its dead-letter queue (redrive after
// maxReceive receives) on fauxqs, deleted when t ends, and opens a
// transport on them.
func openFauxqs(t *testing.T, c *awssqs.Client, maxSize int64, opts Options) *Transport {
	t.Helper()
	ctx := t.Context()
	name := fmt.Sprintf("claimcheck-stores-%d-%d", time.Now().UnixNano(), queueSeq.Add(1))
	attrs := map[string]string{}
	if maxSize > 0 {
		attrs[string(types.QueueAttributeNameMaximumMessageSize)] = strconv.FormatInt(maxSize, 10)
	}
	create := func(name string, attrs map[string]string) (url, arn string) {
		out, err := c.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if err != nil {
			t.Fatalf("CreateQueue %s: %v", name, err)
		}
		url = aws.ToString(out.QueueUrl)
		t.Cleanup(func() { _, _ = c.DeleteQueue(t.Context(), &awssqs.DeleteQueueInput{QueueUrl: aws.String(url)}) })
		ga, err := c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatalf("GetQueueAttributes %s: %v", name, err)
		}
		return url, ga.Attributes[string(types.QueueAttributeNameQueueArn)]
	}
	dlq, dlqARN := create(name+"-dead", attrs)
	main := map[string]string{string(types.QueueAttributeNameRedrivePolicy): RedrivePolicy(dlqARN, 10)}
	for k, v := range attrs {
		main[k] = v
	}
	q, _ := create(name, main)
	opts.Client, opts.QueueURL, opts.DeadLetterQueueURL, opts.MaxMessageSize = c, q, dlq, maxSize
	if opts.WaitTime == 0 {
		opts.WaitTime = 2 * time.Second
	}
	tr, err := Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestConformanceAgainstFauxqs(t *testing.T) {
	c := fauxqsClient(t)
	brokertest.RunConformance(t, func(t *testing.T) broker.Transport { return openFauxqs(t, c, 0, Options{}) })
}

func TestConformanceAgainstFauxqs1MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	c := fauxqsClient(t)
	brokertest.RunConformance(t, func(t *testing.T) broker.Transport { return openFauxqs(t, c, MaxMessageSizeLimit, Options{}) })
}

// TestCancelledReceiveGivesBack: SQS (and fauxqs, and the stand-in, which
// model it) goes on with a long poll whose client has gone, and hides what
// it takes for the visibility timeout (30 s here). A Receive cancelled
// mid-poll must give such a message back at once, so that the next
// Receive gets it long before that; this is what lets Consume stop
// receiving (drain, --until-empty) without delaying a message by a
// visibility timeout.
func TestCancelledReceiveGivesBack(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) *Transport{
		"StandIn": func(t *testing.T) *Transport { tr, _ := openStandIn(t, 0); return tr },
		"Fauxqs": func(t *testing.T) *Transport {
			return openFauxqs(t, fauxqsClient(t), 0, Options{WaitTime: 3 * time.Second})
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := open(t)
			ctx, cancel := context.WithCancel(t.Context())
			got := make(chan error, 1)
			go func() {
				_, err := tr.Receive(ctx, 1) // no deadline: a full long poll
				got <- err
			}()
			time.Sleep(300 * time.Millisecond) // the poll is on the server
			cancel()
			if err := <-got; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Receive: %v", err)
			}
			// The abandoned poll is still open on the server: it takes this.
			if err := tr.Publish(t.Context(), []broker.Message{{Body: []byte("taken by a poll nobody reads")}}); err != nil {
				t.Fatal(err)
			}
			rctx, rcancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer rcancel()
			start := time.Now()
			ds, err := tr.Receive(rctx, 1)
			if err != nil {
				t.Fatalf("Receive after the cancelled one: %v after %v (the message stayed hidden)", err, time.Since(start))
			}
			t.Logf("received after %v, attempt %d", time.Since(start).Round(time.Millisecond), ds[0].Attempt)
			if err := tr.Ack(t.Context(), ds[0]); err != nil {
				t.Fatal(err)
			}
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
