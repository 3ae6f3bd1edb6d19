package sqs

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/pipeline/pipelinetest"
)

func (s *standInSQS) setVisibility(url string, d time.Duration) {
	s.mu.Lock()
	s.queues[url].visibility = d
	s.mu.Unlock()
}

// TestLeaseFollowsVisibilityAgainstStandIn: on a queue whose visibility
// timeout is 5 s (the queue's attribute; the transport is not told), a 7 s
// handler's delivery is extended before it expires, acknowledged once on
// its first receipt, and never redelivered to the second consumer polling
// the same queue.
func TestLeaseFollowsVisibilityAgainstStandIn(t *testing.T) {
	raw, s := openStandIn(t, 0)
	s.setVisibility(raw.QueueURL(), leaseVisibility)
	testLeaseFollowsVisibility(t, raw, func() (int, int) { return s.count(raw.QueueURL()) })
}

// TestLeaseFollowsVisibilityAgainstFauxqs: the same on fauxqs, the queue's
// VisibilityTimeout set to 5 s with SetQueueAttributes.
func TestLeaseFollowsVisibilityAgainstFauxqs(t *testing.T) {
	c := fauxqsClient(t)
	raw := openFauxqs(t, c, 0, Options{})
	url := aws.String(raw.QueueURL())
	if _, err := c.SetQueueAttributes(t.Context(), &awssqs.SetQueueAttributesInput{QueueUrl: url,
		Attributes: map[string]string{string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(leaseVisibility / time.Second))}}); err != nil {
		t.Fatal(err)
	}
	testLeaseFollowsVisibility(t, raw, func() (int, int) {
		out, err := c.GetQueueAttributes(t.Context(), &awssqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			t.Fatal(err)
		}
		visible, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		inflight, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return visible, inflight
	})
}

// leaseVisibility is the visibility timeout of the lease tests' queues.
const leaseVisibility = 5 * time.Second

// testLeaseFollowsVisibility runs brokertest.LeaseFollows with a 7 s
// handler on raw, whose queue's visibility timeout is leaseVisibility,
// and checks the queue is empty (count: visible and in-flight messages).
func testLeaseFollowsVisibility(t *testing.T, raw *Transport, count func() (visible, inflight int)) {
	brokertest.LeaseFollows(t, raw, leaseVisibility, 7*time.Second, func(t *testing.T) {
		if visible, inflight := count(); visible+inflight != 0 {
			t.Fatalf("queue: %d visible, %d in flight; want it empty", visible, inflight)
		}
	})
}

// snsStandIn is a STAND-IN for an Amazon SNS topic with raw message
// delivery to several SQS queues (no SNS emulator runs here): Publish sends
// each message, body and attributes unchanged, to every subscribed queue
// of the SQS stand-in, as SNS would, and FanOutQueues names them. It only
// publishes.
type snsStandIn struct{ queues []*Transport }

var _ broker.FanOut = (*snsStandIn)(nil)

var errPublishOnly = errors.New("SNS stand-in: a topic only publishes")

func (s *snsStandIn) MaxMessageSize() int64 { return s.queues[0].MaxMessageSize() }
func (s *snsStandIn) Publish(ctx context.Context, msgs []broker.Message) error {
	for _, q := range s.queues {
		if err := q.Publish(ctx, msgs); err != nil {
			return err
		}
	}
	return nil
}
func (s *snsStandIn) Receive(context.Context, int) ([]*broker.Delivery, error) {
	return nil, errPublishOnly
}
func (s *snsStandIn) Ack(context.Context, *broker.Delivery) error { return errPublishOnly }
func (s *snsStandIn) Retry(context.Context, *broker.Delivery, time.Duration) error {
	return errPublishOnly
}
func (s *snsStandIn) DeadLetter(context.Context, *broker.Delivery, string) error {
	return errPublishOnly
}
func (s *snsStandIn) Extend(context.Context, *broker.Delivery, time.Duration) error {
	return errPublishOnly
}
func (s *snsStandIn) Close() error { return nil }
func (s *snsStandIn) FanOutQueues() ([]string, error) {
	var names []string
	for _, q := range s.queues {
		names = append(names, q.QueueName())
	}
	return names, nil
}

// TestFanOutTwoQueuesAgainstStandIn: one message fed to two SQS queues
// with the same body (an SNS topic's two subscriptions) runs its handler
// once in each; with deletion on acknowledgement the object goes only
// with the second acknowledgement, and a failed first release is made
// good by the redelivery (pipelinetest.BrokerFanOut).
func TestFanOutTwoQueuesAgainstStandIn(t *testing.T) {
	s := newStandInSQS(t)
	var qs []*Transport
	for _, name := range []string{"fan-a", "fan-b"} {
		tr, err := Open(t.Context(), Options{Client: standInClient(s), QueueURL: s.createQueue(name, 0), DeadLetterQueueURL: s.createQueue(name+"-dead", 0), WaitTime: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, tr)
	}
	pipelinetest.BrokerFanOut(t, &snsStandIn{queues: qs}, []broker.Transport{qs[0], qs[1]})
}

// TestFanOutTwoQueuesAgainstFauxqs: the same with two fauxqs queues fed
// by the SNS stand-in.
func TestFanOutTwoQueuesAgainstFauxqs(t *testing.T) {
	c := fauxqsClient(t)
	qs := []*Transport{openFauxqs(t, c, 0, Options{WaitTime: time.Second}), openFauxqs(t, c, 0, Options{WaitTime: time.Second})}
	pipelinetest.BrokerFanOut(t, &snsStandIn{queues: qs}, []broker.Transport{qs[0], qs[1]})
}

// TestLeaseHeldForWholeBatchAgainstStandIn: two messages received in one
// batch on a queue with a 3 s visibility timeout, each worked for 2.5 s in
// turn: the second waits 2.5 s before its handler starts, and is still
// extended from its receipt, so the competing consumer never gets it.
func TestLeaseHeldForWholeBatchAgainstStandIn(t *testing.T) {
	raw, s := openStandIn(t, 0)
	const visibility, handlerTime = 3 * time.Second, 2500 * time.Millisecond
	s.setVisibility(raw.QueueURL(), visibility)
	store := brokertest.FileStore(t, nil)
	ctx := t.Context()
	var msgs []broker.Message
	for _, body := range []string{"first", "second"} {
		msgs = append(msgs, brokertest.Message(t, store, "slow", body))
	}
	if err := raw.Publish(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var runs, late atomic.Int64
	cctx, cancel := context.WithTimeout(ctx, 2*handlerTime+visibility+time.Second)
	defer cancel()
	errc := make(chan error, 2)
	for _, batch := range []int{2, 1} { // the first receives both
		go func() {
			errc <- broker.Consume(cctx, raw, store, broker.ConsumeOptions{
				Batch: batch,
				Handlers: map[string]claimcheck.Handler{"slow": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
					runs.Add(1)
					if job.Attempt > 1 {
						late.Add(1)
					}
					select {
					case <-time.After(handlerTime):
					case <-ctx.Done():
					}
					return nil, nil
				})},
			})
		}()
		time.Sleep(300 * time.Millisecond) // let the batch of two go first
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	visible, inflight := s.count(raw.QueueURL())
	t.Logf("visibility %v, two %v handlers in one batch: handler runs %d, redelivered runs %d, queue %d+%d", visibility, handlerTime, runs.Load(), late.Load(), visible, inflight)
	if runs.Load() != 2 || late.Load() != 0 || visible+inflight != 0 {
		t.Fatalf("handler runs %d (redelivered %d), queue %d+%d; want 2 runs, none redelivered, an empty queue", runs.Load(), late.Load(), visible, inflight)
	}
}
