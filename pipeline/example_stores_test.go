package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Example_namedStores is the README's region pinning: a producer that has
// the default store and the named stores eu and us puts a job in eu; a
// worker whose only store is eu works it, and would never fetch a job of
// us or of the default store (they wait for workers that have those
// stores). Two file stores stand in for two regions' buckets.
func Example_namedStores() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	open := func(name string) *claimcheck.Store {
		st, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "objects-"+name), &claimcheck.Options{Name: name, SpoolDir: dir})
		if err != nil {
			panic(err)
		}
		return st
	}
	def, eu, us := open(""), open("eu"), open("us")
	defer def.Close()
	defer eu.Close()
	defer us.Close()
	db := "sqlite://" + filepath.Join(dir, "jobs.db")
	consignment := strings.NewReader(`{"consignment":42}`)

	p, err := pipeline.Open(ctx, pipeline.Config{Database: db, Store: def, Stores: []*claimcheck.Store{eu, us}})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	res, err := p.Enqueue(ctx, "customs", "acme", consignment, &pipeline.EnqueueOptions{Store: "eu"})
	if err != nil {
		panic(err)
	}
	usJob, err := p.Enqueue(ctx, "customs", "acme", strings.NewReader(`{"consignment":43}`), &pipeline.EnqueueOptions{Store: "us"})
	if err != nil {
		panic(err)
	}

	// In eu-west-1: a pipeline whose only store is eu works eu's jobs only.
	euOnly, err := pipeline.Open(ctx, pipeline.Config{Database: db, Store: eu})
	if err != nil {
		panic(err)
	}
	defer euOnly.Close()
	handlers := map[string]claimcheck.Handler{"customs": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		return &claimcheck.Result{Body: strings.NewReader("cleared"), ContentType: "text/plain"}, nil
	})}
	if err := euOnly.Work(ctx, pipeline.WorkOptions{Handlers: handlers, UntilEmpty: true}); err != nil {
		panic(err)
	}
	for _, id := range []int64{res.JobID, usJob.JobID} {
		j, err := p.Get(ctx, id)
		if err != nil {
			panic(err)
		}
		fmt.Printf("job of store %s: %s after %d attempts\n", j.Store, j.State, j.Attempts)
	}
	// Output:
	// job of store eu: completed after 1 attempts
	// job of store us: available after 0 attempts
}
