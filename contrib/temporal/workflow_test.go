package temporal_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/bench"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"

	cctemporal "github.com/claimcheck/claimcheck/contrib/temporal"
)

// echoQueue is the task queue of EchoWorkflow's workers.
const echoQueue = "claimcheck-echo"

// EchoActivity returns its input with every byte incremented: a result as
// large as the input that is not the same object.
func EchoActivity(ctx context.Context, in []byte) ([]byte, error) {
	out := make([]byte, len(in))
	for i, b := range in {
		out[i] = b + 1
	}
	return out, nil
}

// EchoWorkflow passes its input to EchoActivity and returns its result: the
// input crosses the history twice (the workflow's input, the activity's),
// and so does the result.
func EchoWorkflow(ctx workflow.Context, in []byte) ([]byte, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 5 * time.Minute})
	var out []byte
	err := workflow.ExecuteActivity(ctx, EchoActivity, in).Get(ctx, &out)
	return out, err
}

// storageOptions is the client option that sets d as the only driver.
func storageOptions(d *cctemporal.Driver) client.Options {
	return client.Options{ExternalStorage: converter.ExternalStorage{Drivers: []converter.StorageDriver{d}}}
}

// historyClaims returns the tickets of the claims in a workflow's history,
// read by a client without the driver, and the history's size in bytes.
func historyClaims(t *testing.T, c client.Client, run client.WorkflowRun) (tickets []*claimcheck.Ticket, events []string, total int) {
	t.Helper()
	it := c.GetWorkflowHistory(t.Context(), run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("history: %v", err)
		}
		b, _ := json.Marshal(ev)
		total += len(b)
		events = append(events, ev.GetEventType().String())
		var ps []*commonpb.Payload
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			ps = ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			ps = ev.GetActivityTaskScheduledEventAttributes().GetInput().GetPayloads()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			ps = ev.GetActivityTaskCompletedEventAttributes().GetResult().GetPayloads()
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			ps = ev.GetWorkflowExecutionCompletedEventAttributes().GetResult().GetPayloads()
		}
		for _, p := range ps {
			var ref struct {
				ClaimData map[string]string `json:"claimData"`
			}
			if len(p.GetExternalPayloads()) == 0 || json.Unmarshal(p.GetData(), &ref) != nil {
				t.Errorf("history event %d (%v): a payload of %d bytes is not a claim", ev.GetEventId(), ev.GetEventType(), len(p.GetData()))
				continue
			}
			tk, err := cctemporal.ParseClaim(converter.StorageDriverClaim{ClaimData: ref.ClaimData})
			if err != nil {
				t.Errorf("history event %d: %v", ev.GetEventId(), err)
				continue
			}
			tickets = append(tickets, tk)
		}
	}
	return tickets, events, total
}

// TestTemporalNamespaceTenant: a driver that maps the workflow's namespace
// to a tenant checks that namespace's payloads in under the tenant, and a
// namespace it has no tenant for (and no default) is refused as forbidden
// when the client stores the workflow's input.
func TestTemporalNamespaceTenant(t *testing.T) {
	store := openFileStore(t, nil)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	ns := ts.GetDefaultNamespace()
	d, err := cctemporal.New(store, cctemporal.Options{Namespaces: map[string]string{ns: "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	c := ts.NewClientWithOptions(storageOptions(d))
	w := worker.New(c, echoQueue, worker.Options{})
	w.RegisterWorkflow(EchoWorkflow)
	w.RegisterActivity(EchoActivity)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	in := bigResult(3, 300<<10)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: echoQueue}, EchoWorkflow, in)
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	var out []byte
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow: %v", err)
	}
	want, _ := EchoActivity(ctx, in)
	if !bytes.Equal(out, want) {
		t.Fatalf("result differs: %d bytes", len(out))
	}
	tickets, _, _ := historyClaims(t, ts.GetDefaultClient(), run)
	if len(tickets) != 4 {
		t.Errorf("history holds %d claims, want 4", len(tickets))
	}
	for _, tk := range tickets {
		if tk.Tenant != "orders" {
			t.Errorf("claim %s: tenant %q, want orders (namespace %s)", tk, tk.Tenant, ns)
		}
	}
	t.Logf("namespace %s → tenant orders: %d claims", ns, len(tickets))

	// Another driver knows only another namespace: the client's store of
	// the input is refused before the workflow starts.
	other, err := cctemporal.New(store, cctemporal.Options{Namespaces: map[string]string{"billing": "billing"}})
	if err != nil {
		t.Fatal(err)
	}
	c2 := ts.NewClientWithOptions(storageOptions(other))
	_, err = c2.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: echoQueue}, EchoWorkflow, in)
	if !errors.Is(err, claimcheck.ErrTicketForbidden) || !strings.Contains(err.Error(), ns) {
		t.Fatalf("ExecuteWorkflow in an unmapped namespace = %v, want ErrTicketForbidden naming %s", err, ns)
	}
}

// TestTemporalPayloadDeletedOutOfBand: a workflow whose input object was
// deleted out of band (by hand, or a lifecycle rule shorter than the
// workflow) fails its workflow task with the driver's permanent
// payload-missing error, named in the history, and never runs; the driver
// answers each attempt at once, without retrying the store.
func TestTemporalPayloadDeletedOutOfBand(t *testing.T) {
	store := openFileStore(t, nil)
	d := newDriver(t, store)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.NewClientWithOptions(storageOptions(d))
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// Started with no worker: the input is stored, then deleted.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: echoQueue}, EchoWorkflow, bigResult(5, 1<<20))
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	tickets, _, _ := historyClaims(t, ts.GetDefaultClient(), run)
	if len(tickets) != 1 {
		t.Fatalf("history holds %d claims before any worker, want 1 (the input)", len(tickets))
	}
	if err := store.Bucket().Delete(ctx, tickets[0].Key); err != nil {
		t.Fatalf("delete the input object: %v", err)
	}
	w := worker.New(c, echoQueue, worker.Options{})
	w.RegisterWorkflow(EchoWorkflow)
	w.RegisterActivity(EchoActivity)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// The workflow task fails with the driver's error, recorded in the
	// history; the workflow stays open (Temporal re-attempts a failed
	// workflow task, as after any worker-side error) and never runs.
	var failure string
	for failure == "" {
		if ctx.Err() != nil {
			t.Fatal("no WorkflowTaskFailed event within 2 minutes")
		}
		it := ts.GetDefaultClient().GetWorkflowHistory(ctx, run.GetID(), run.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				t.Fatalf("history: %v", err)
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
				t.Fatal("the workflow ran without its input")
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
				failure = ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage()
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("WorkflowTaskFailed: %s", failure)
	for _, want := range []string{"claimcheck temporal driver", "retrieve payload 1 of 1", "payload missing"} {
		if !strings.Contains(failure, want) {
			t.Errorf("failure %q does not say %q", failure, want)
		}
	}
	if strings.Contains(failure, tickets[0].Key) {
		t.Errorf("failure names the full object key: %q", failure)
	}
	desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Errorf("workflow status %v, want running (its task failing)", st)
	}
}

// TestTemporalLargePayloads runs EchoWorkflow with a 20 MiB input (and,
// with CLAIMCHECK_TEST_TEMPORAL_200MIB=1, 200 MiB) whose worker is a
// process of its own (this test binary, TestTemporalWorkerProcess), and
// logs the worker's peak memory: the largest anonymous RSS sampled every
// 20 ms, and VmHWM. The history holds only claims.
func TestTemporalLargePayloads(t *testing.T) {
	sizes := []int{20 << 20}
	if os.Getenv("CLAIMCHECK_TEST_TEMPORAL_200MIB") == "1" {
		sizes = append(sizes, 200<<20)
	}
	dir := t.TempDir()
	store := openFileStoreAt(t, dir)
	d := newDriver(t, store)
	ts := temporaltest.NewServer(temporaltest.WithT(t))
	c := ts.NewClientWithOptions(storageOptions(d))
	for _, size := range sizes {
		t.Run(fmt.Sprintf("%dMiB", size>>20), func(t *testing.T) {
			worker := startWorkerProcess(t, ts.GetFrontendHostPort(), ts.GetDefaultNamespace(), dir)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			in := bigResult(uint64(size>>20), size)
			start := time.Now()
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: echoQueue}, EchoWorkflow, in)
			if err != nil {
				t.Fatalf("ExecuteWorkflow: %v", err)
			}
			var out []byte
			if err := run.Get(ctx, &out); err != nil {
				t.Fatalf("workflow: %v", err)
			}
			elapsed := time.Since(start)
			want, _ := EchoActivity(ctx, in)
			if !bytes.Equal(out, want) {
				t.Fatalf("result: %d bytes, sha256 %x; want %d bytes, sha256 %x", len(out), sha256.Sum256(out), len(want), sha256.Sum256(want))
			}
			tickets, events, total := historyClaims(t, ts.GetDefaultClient(), run)
			if len(tickets) != 4 {
				t.Errorf("history holds %d claims, want 4", len(tickets))
			}
			anon, hwm := worker.stop(t)
			t.Logf("workflow %s: %d MiB in and out in %v; history %d events, %d bytes as JSON, %d claims (%s); worker process peak RssAnon %d MiB, VmHWM %d MiB",
				run.GetID(), size>>20, elapsed.Round(time.Millisecond), len(events), total, len(tickets), tickets[0], anon>>10, hwm>>10)
		})
	}
}

// openFileStoreAt opens a plain file store in dir, as the worker process
// opens it too.
func openFileStoreAt(t *testing.T, dir string) *claimcheck.Store {
	t.Helper()
	s, err := claimcheck.OpenStore(t.Context(), "file://"+dir, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// workerProcess is a worker running in a process of its own.
type workerProcess struct {
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	out   *bufio.Scanner
}

// startWorkerProcess runs this test binary as an EchoWorkflow worker
// (TestTemporalWorkerProcess) on the server at hostport, over the file
// store in dir, and waits until its worker has started.
func startWorkerProcess(t *testing.T, hostport, namespace, dir string) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTemporalWorkerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "CCTEMPORAL_WORKER="+hostport, "CCTEMPORAL_NAMESPACE="+namespace, "CCTEMPORAL_STORE="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProcess{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for w.out.Scan() {
		if strings.Contains(w.out.Text(), "worker started") {
			return w
		}
	}
	t.Fatalf("the worker process ended before its worker started: %v", w.out.Err())
	return nil
}

// stop ends the worker process and returns its peak anonymous RSS and
// VmHWM, in KiB.
func (w *workerProcess) stop(t *testing.T) (anonKiB, hwmKiB int64) {
	t.Helper()
	w.stdin.Close()
	for w.out.Scan() {
		line := w.out.Text()
		if _, rest, ok := strings.Cut(line, "PEAK "); ok {
			f := strings.Fields(rest)
			if len(f) == 2 {
				anonKiB, _ = strconv.ParseInt(f[0], 10, 64)
				hwmKiB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("worker process: %v", err)
	}
	if anonKiB == 0 {
		t.Error("the worker process reported no peak memory")
	}
	return anonKiB, hwmKiB
}

// TestTemporalWorkerProcess is the worker process of
// TestTemporalLargePayloads: run only with CCTEMPORAL_WORKER set, it works
// EchoWorkflow until its standard input closes, then prints its peak
// memory.
func TestTemporalWorkerProcess(t *testing.T) {
	hostport := os.Getenv("CCTEMPORAL_WORKER")
	if hostport == "" {
		t.Skip("the worker process of TestTemporalLargePayloads (run by it)")
	}
	stopSampling := make(chan struct{})
	peak := make(chan [2]uint64)
	go func() {
		var anon, hwm uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if a, h, err := bench.Memory(); err == nil {
				anon, hwm = max(anon, a), max(hwm, h)
			}
			select {
			case <-tick.C:
			case <-stopSampling:
				peak <- [2]uint64{anon, hwm}
				return
			}
		}
	}()
	store := openFileStoreAt(t, os.Getenv("CCTEMPORAL_STORE"))
	d := newDriver(t, store)
	opts := storageOptions(d)
	opts.HostPort, opts.Namespace = hostport, os.Getenv("CCTEMPORAL_NAMESPACE")
	c, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := worker.New(c, echoQueue, worker.Options{})
	w.RegisterWorkflow(EchoWorkflow)
	w.RegisterActivity(EchoActivity)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("worker started")
	_, _ = bufio.NewReader(os.Stdin).ReadString(0) // until the test closes it
	w.Stop()
	close(stopSampling)
	p := <-peak
	fmt.Printf("PEAK %d %d\n", p[0]>>10, p[1]>>10)
}
