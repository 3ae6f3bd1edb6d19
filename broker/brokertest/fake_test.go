package brokertest_test

import (
	"testing"

	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
)

// TestFakeConformance checks the suite itself against the in-process fake
// transport; it needs no broker.
func TestFakeConformance(t *testing.T) {
	brokertest.RunConformance(t, func(t *testing.T) broker.Transport {
		m := brokertest.NewFake(64 << 10)
		t.Cleanup(func() { m.Close() })
		return m
	})
}
