package temporal_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
	"google.golang.org/protobuf/proto"

	cctemporal "github.com/claimcheck/claimcheck/contrib/temporal"
)

// resultSize is the activity's result: 5 MiB, past the 4 MiB a gRPC message
// to the Temporal server may carry, so only a claim can get it through.
const resultSize = 5 << 20

// bigResult returns n bytes that depend on seed only.
func bigResult(seed uint64, n int) []byte {
	b := make([]byte, n)
	var s [32]byte
	s[0] = byte(seed)
	_, _ = rand.NewChaCha8(s).Read(b)
	return b
}

func BigActivity(ctx context.Context, seed uint64, n int) ([]byte, error) {
	return bigResult(seed, n), nil
}

// BigWorkflow returns its activity's result: the result crosses the history
// twice (the activity's completion and the workflow's).
func BigWorkflow(ctx workflow.Context, seed uint64, n int) ([]byte, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var b []byte
	err := workflow.ExecuteActivity(ctx, BigActivity, seed, n).Get(ctx, &b)
	return b, err
}

// TestTemporalServerLargeResult runs a workflow on an in-process Temporal
// server (temporaltest: the dev server, SQLite in memory) whose activity
// returns 5 MiB through the driver over a claimcheck file store, and checks
// the result arrives intact while the history holds only small claims.
func TestTemporalServerLargeResult(t *testing.T) {
	store := openFileStore(t, nil)
	d := newDriver(t, store)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.NewClientWithOptions(client.Options{
		ExternalStorage: converter.ExternalStorage{Drivers: []converter.StorageDriver{d}},
	})
	const queue = "claimcheck-temporal"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(BigWorkflow)
	w.RegisterActivity(BigActivity)
	if err := w.Start(); err != nil {
		t.Fatalf("worker start: %v", err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: queue}, BigWorkflow, uint64(7), resultSize)
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	var got []byte
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	want := bigResult(7, resultSize)
	if !bytes.Equal(got, want) {
		t.Fatalf("result: %d bytes, sha256 %x; want %d bytes, sha256 %x", len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
	t.Logf("5 MiB round trip through the driver in %v", time.Since(start).Round(time.Millisecond))

	// The raw history, read by a client without the driver: every event is
	// small, and the two 5 MiB results are claims for claimcheck tickets.
	raw := ts.GetDefaultClient()
	it := raw.GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var total, refs int
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		n := proto.Size(ev)
		total += n
		if n > 4<<10 {
			t.Errorf("history event %d (%v) is %d bytes, want at most 4 KiB", ev.GetEventId(), ev.GetEventType(), n)
		}
		var result *commonpb.Payloads
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			result = ev.GetActivityTaskCompletedEventAttributes().GetResult()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			result = ev.GetWorkflowExecutionCompletedEventAttributes().GetResult()
		default:
			continue
		}
		for _, p := range result.GetPayloads() {
			if err := checkReference(t.Context(), store, p); err != nil {
				t.Errorf("history event %d (%v): %v", ev.GetEventId(), ev.GetEventType(), err)
				continue
			}
			refs++
		}
	}
	if refs != 2 {
		t.Errorf("history holds %d claims, want 2 (the activity's result and the workflow's)", refs)
	}
	t.Logf("history: %d bytes in all, %d claims", total, refs)
}

// checkReference checks that p is Temporal's reference to an externally
// stored payload whose claim holds a ticket for an object in store.
func checkReference(ctx context.Context, store *claimcheck.Store, p *commonpb.Payload) error {
	if len(p.GetExternalPayloads()) == 0 {
		return fmt.Errorf("payload of %d bytes is not a reference to an external payload", len(p.GetData()))
	}
	// The reference's data is ExternalStorageReference in protojson:
	// {"driverName":"claimcheck","claimData":{"ticket":"{...}"}}.
	if !bytes.Contains(p.GetData(), []byte(`"driverName":"`+cctemporal.DefaultName+`"`)) {
		return fmt.Errorf("reference names another driver: %.200s", p.GetData())
	}
	var ref struct {
		ClaimData map[string]string `json:"claimData"`
	}
	if err := json.Unmarshal(p.GetData(), &ref); err != nil {
		return fmt.Errorf("reference: %v", err)
	}
	tk, err := cctemporal.ParseClaim(converter.StorageDriverClaim{ClaimData: ref.ClaimData})
	if err != nil {
		return err
	}
	if !strings.HasPrefix(tk.Key, claimcheck.PrefixPayloads+"temporal/") || tk.Size < resultSize {
		return fmt.Errorf("ticket %s: want a payload of at least %d bytes under the tenant temporal", tk, resultSize)
	}
	pl, err := store.Claim(tk)
	if err != nil {
		return err
	}
	defer pl.Close()
	return pl.Verify(ctx)
}
