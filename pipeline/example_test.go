package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Example_enqueueAndWork shows the whole claim check on the embedded
// default: a payload is checked into a file:// store and a job carrying its
// ticket is enqueued in SQLite; a worker claims and verifies the payload,
// its handler returns a result, which is checked in too and read back with
// OpenResult.
func Example_enqueueAndWork() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "objects"),
		&claimcheck.Options{SpoolDir: filepath.Join(dir, "spool")})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	p, err := pipeline.Open(ctx, pipeline.Config{
		Database: "sqlite://" + filepath.Join(dir, "jobs.db"),
		Store:    store,
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	// Producer: check the payload in and enqueue its ticket.
	res, err := p.Enqueue(ctx, "shout", "acme", strings.NewReader("hello, claim check"), nil)
	if err != nil {
		panic(err)
	}

	// Worker: the handler only ever sees verified bytes.
	shout := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		r, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		data, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return &claimcheck.Result{Body: bytes.NewReader(bytes.ToUpper(data)), ContentType: "text/plain"}, nil
	})
	if err := p.Work(ctx, pipeline.WorkOptions{
		Handlers:   map[string]claimcheck.Handler{"shout": shout},
		UntilEmpty: true,
	}); err != nil {
		panic(err)
	}

	job, err := p.Get(ctx, res.JobID)
	if err != nil {
		panic(err)
	}
	fmt.Println("state:", job.State, "attempts:", job.Attempts)

	result, _, err := p.OpenResult(ctx, res.JobID)
	if err != nil {
		panic(err)
	}
	defer result.Close()
	out, err := io.ReadAll(result)
	if err != nil {
		panic(err)
	}
	fmt.Println("result:", string(out))

	// Output:
	// state: completed attempts: 1
	// result: HELLO, CLAIM CHECK
}
