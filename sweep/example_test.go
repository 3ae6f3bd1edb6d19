package sweep_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/sweep"
)

// ExampleSweep removes an orphan, an object no job references (here a
// payload checked in straight into the store, as a producer that crashed
// before enqueueing leaves one), once it is older than the grace period,
// and keeps the payload a queued job holds. The clock is a day ahead
// instead of a day of waiting.
func ExampleSweep() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-sweep-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "objects"), &claimcheck.Options{SpoolDir: dir, AlwaysOffload: true})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: "sqlite://" + filepath.Join(dir, "jobs.db"), Store: store})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	if _, err := p.Enqueue(ctx, "render", "acme", strings.NewReader("a queued job's payload"), nil); err != nil {
		panic(err)
	}
	if _, err := store.CheckIn(ctx, "acme", strings.NewReader("an orphan: its producer died before the enqueue"), nil); err != nil {
		panic(err)
	}

	rep, err := sweep.Sweep(ctx, sweep.Options{
		Store: store,
		DB:    p.DB(),
		Grace: 24 * time.Hour,
		Now:   func() time.Time { return time.Now().Add(25 * time.Hour) },
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("listed %d objects, removed %d, kept %d\n", rep.Listed, rep.Removed, rep.Kept)
	// Output: listed 2 objects, removed 1, kept 1
}
