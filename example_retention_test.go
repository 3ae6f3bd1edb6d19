package claimcheck_test

import (
	"fmt"
	"time"

	"github.com/claimcheck/claimcheck"
)

// ExampleComputeRetention sizes a bucket's lifecycle expiry: payloads must
// outlive every path to processing (backlog, retries, dead-letter
// retention, a human's replay margin: docs/invariants.md, invariant 5),
// rounded up to whole days; results get their own, longer, expiry.
func ExampleComputeRetention() {
	r, err := claimcheck.ComputeRetention(claimcheck.RetentionInputs{
		Backlog:      24 * time.Hour,
		RetryWindow:  3*time.Hour + 10*time.Minute, // 5 attempts × (30 min timeout + 2 min lease + 6 min backoff)
		DeadLetter:   14 * 24 * time.Hour,
		ReplayMargin: 7 * 24 * time.Hour,
		ResultsExtra: 30 * 24 * time.Hour,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("payloads/ expire after", r.PayloadDays, "days, not", r.TruncatedDays)
	fmt.Println("results/ expire after", r.ResultDays, "days")
	// Output:
	// payloads/ expire after 23 days, not 22
	// results/ expire after 53 days
}
