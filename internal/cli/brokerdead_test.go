package cli

import (
	"strings"
	"testing"
)

// TestBrokerDeadError: the summary of broker dead letters points at
// claimcheck dead only for relayed outbox entries, and sends the others
// (no job: foreign producers) to the broker's dead-letter queue.
func TestBrokerDeadError(t *testing.T) {
	for _, c := range []struct {
		n       int64
		jobs    []int64
		want    []string
		wantNot []string
	}{
		{3, []int64{0, 0, 0}, []string{"3 messages", "3 sent by producers outside the job database", "dead-letter queue"}, []string{"see: claimcheck dead", "jobs ["}},
		{2, []int64{7, 5}, []string{"2 relayed from the outbox (jobs [5 7]): see: claimcheck dead"}, []string{"outside the job database"}},
		{3, []int64{0, 4, 0}, []string{"1 relayed from the outbox (jobs [4])", "2 sent by producers outside"}, nil},
	} {
		msg := brokerDeadError(c.n, c.jobs).Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: %q lacks %q", c.jobs, msg, w)
			}
		}
		for _, w := range c.wantNot {
			if strings.Contains(msg, w) {
				t.Errorf("%v: %q has %q", c.jobs, msg, w)
			}
		}
	}
}
