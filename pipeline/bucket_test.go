package pipeline

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
)

// TestBucketRemovedJobsWait (issue 12, must-show 4, on SeaweedFS): jobs
// whose bucket is removed after the worker started wait (retried as
// store-unavailable, no attempt spent, the error naming the missing
// bucket), never dead as payload-missing; once the bucket and its objects
// are back, they complete. Offloaded and sealed payloads both: a sealed
// claim's first call is a HEAD, whose bare 404 does not tell a missing
// bucket from a missing object.
func TestBucketRemovedJobsWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gone, kept := s3test.New(t, "pipeline-gone"), s3test.New(t, "pipeline-backup")
	client, bucket, backup := gone.Client, gone.Name, kept.Name
	// move moves every object of from to to (CopyObject keeps metadata).
	move := func(from, to string) {
		t.Helper()
		out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(from)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			if to != "" {
				if _, err := client.CopyObject(context.Background(), &s3.CopyObjectInput{Bucket: aws.String(to), Key: o.Key, CopySource: aws.String(from + "/" + aws.ToString(o.Key))}); err != nil {
					t.Fatal(err)
				}
			}
			_, _ = client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(from), Key: o.Key})
		}
	}
	u, _ := url.Parse(gone.URL)

	dir := t.TempDir()
	kek, err := localsecrets.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts claimcheck.Options
	}{
		{"Plain", claimcheck.Options{AlwaysOffload: true}},
		{"Sealed", claimcheck.Options{AlwaysOffload: true, Keeper: localsecrets.NewKeeper(kek)}},
	} {
		tc.opts.SpoolDir = filepath.Join(dir, tc.name)
		tc.opts.Name = strings.ToLower(tc.name)
		nu := *u // a namespace per job database
		q := nu.Query()
		q.Set("prefix", tc.opts.Name+"/")
		nu.RawQuery = q.Encode()
		st, err := claimcheck.OpenStore(ctx, nu.String(), &tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		p, err := Open(ctx, Config{Database: filepath.Join(dir, tc.name+".db"), Store: st, Retry: claimcheck.RetryPolicy{Base: 10 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		res, err := p.Enqueue(ctx, "docs", "acme", strings.NewReader("payload of "+tc.name), nil)
		if err != nil {
			t.Fatal(err)
		}
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			move(bucket, backup)
			if _, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var outcomes []Outcome
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			h := &recorder{}
			if err := p.Work(wctx, WorkOptions{Handlers: map[string]claimcheck.Handler{"docs": h}, DrainTimeout: -1, OnDone: func(o Outcome) {
				mu.Lock()
				defer mu.Unlock()
				outcomes = append(outcomes, o)
			}}); err != nil {
				t.Fatal(err)
			}
			if len(outcomes) == 0 {
				t.Fatal("no attempt while the bucket was gone")
			}
			for _, o := range outcomes {
				if o.State != JobWaiting || o.Reason != claimcheck.ReasonUnavailable || !errors.Is(o.Err, claimcheck.ErrNoBucket) || !strings.Contains(o.Err.Error(), `bucket "`+bucket+`" does not exist`) {
					t.Fatalf("attempt %d with the bucket gone: %s, reason %s: %v; want waiting, store-unavailable, naming the bucket", o.Attempt, o.State, o.Reason, o.Err)
				}
			}
			t.Logf("%d attempts while the bucket was gone, all waiting; the first: %v", len(outcomes), outcomes[0].Err)
			if j, _ := p.Get(ctx, res.JobID); j.Dead || j.Attempts > 1 {
				t.Fatalf("job %d: %s, dead %v, %d attempts", j.ID, j.State, j.Dead, j.Attempts)
			}

			if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
				t.Fatal(err)
			}
			move(backup, bucket)
			wctx2, cancel2 := context.WithTimeout(ctx, workTimeout)
			defer cancel2()
			if err := p.Work(wctx2, WorkOptions{Handlers: map[string]claimcheck.Handler{"docs": h}, UntilEmpty: true}); err != nil {
				t.Fatal(err)
			}
			if j, _ := p.Get(ctx, res.JobID); j.State != "completed" {
				t.Fatalf("job %d after the bucket came back: %s (%s: %s)", j.ID, j.State, j.Reason, j.Error)
			}
		})
	}
}
