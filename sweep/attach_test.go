package sweep_test

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
	"github.com/claimcheck/claimcheck/internal/outageproxy"
	"github.com/claimcheck/claimcheck/pipeline"
	"github.com/claimcheck/claimcheck/sweep"
)

// consignment opens a consignment's paperwork, three corpus PDFs, as
// attachments (closed when t ends).
func consignment(t *testing.T, files ...string) []pipeline.Attachment {
	t.Helper()
	names := []string{"label.pdf", "commercial-invoice.pdf", "customs-declaration.pdf"}
	var atts []pipeline.Attachment
	for i, file := range files {
		f, err := os.Open(filepath.Join("..", "testdata", "pdf", file))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		atts = append(atts, pipeline.Attachment{Name: names[i], Body: f, ContentType: "application/pdf"})
	}
	return atts
}

// cutOnRead cuts the proxy as its reader is first read: the store
// becomes unreachable while that attachment is checked in.
type cutOnRead struct {
	r     io.Reader
	proxy *outageproxy.Proxy
	cut   bool
}

func (c *cutOnRead) Read(p []byte) (int, error) {
	if !c.cut {
		c.cut = true
		c.proxy.Cut()
	}
	return c.r.Read(p)
}

// keysUnder lists the keys under prefix.
func keysUnder(t *testing.T, ctx context.Context, store *claimcheck.Store, prefix string) []string {
	t.Helper()
	var keys []string
	it := store.Bucket().List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		if !claimcheck.IsTempKey(obj.Key) && !strings.HasSuffix(obj.Key, ".attrs") {
			keys = append(keys, obj.Key)
		}
	}
}

// TestAttachmentCheckInFailure: SeaweedFS becomes unreachable (a cut
// proxy in front of it) while the third of a consignment's attachments is
// checked in. Enqueue fails naming it, no job is written, and the first
// two attachments, which the store could not delete then, are orphans: a
// sweep past the grace period removes them, and keeps the documents of a
// live consignment job (referenced by its manifest's registry rows).
func TestAttachmentCheckInFailure(t *testing.T) {
	raw := s3URL(t)
	u, _ := url.Parse(raw)
	ep, err := url.Parse(u.Query().Get("endpoint"))
	if err != nil || ep.Host == "" {
		t.Fatalf("CLAIMCHECK_TEST_S3_URL has no endpoint: %v", err)
	}
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"SQLite", dbtest.SQLite}, {"Postgres", dbtest.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			proxy := outageproxy.New(t, ep.Host)
			store := s3TestStoreVia(t, "http://"+proxy.Addr(), &claimcheck.Options{SpoolDir: t.TempDir()})
			ctx := t.Context()
			p, err := pipeline.Open(ctx, pipeline.Config{Database: db.url(t), Store: store})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()

			// A live job, whose documents must survive every sweep.
			live, err := p.Enqueue(ctx, "customs", "acme", strings.NewReader("consignment 41"),
				&pipeline.EnqueueOptions{Attachments: consignment(t, "TeXShopAndAsymptote.pdf", "pixel.pdf")})
			if err != nil {
				t.Fatal(err)
			}
			liveKeys := keysUnder(t, ctx, store, claimcheck.PrefixPayloads)

			atts := consignment(t, "refcard-a4.pdf", "bash.pdf", "octave.pdf")
			atts[2].Body = &cutOnRead{r: atts[2].Body, proxy: proxy}
			_, err = p.Enqueue(ctx, "customs", "acme", nil, &pipeline.EnqueueOptions{Attachments: atts})
			t.Logf("Enqueue with the store cut during the third attachment: %v", err)
			if !errors.Is(err, claimcheck.ErrUnavailable) || !strings.Contains(err.Error(), `attachment "customs-declaration.pdf" (3 of 3)`) {
				t.Fatalf("Enqueue: %v, want store-unavailable naming the third attachment", err)
			}
			proxy.Restore()

			var jobs []int64
			if err := p.List(ctx, pipeline.ListOptions{}, func(j *pipeline.JobInfo) error {
				jobs = append(jobs, j.ID)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 1 || jobs[0] != live.JobID {
				t.Fatalf("jobs %v after the failed enqueue, want only the live job %d", jobs, live.JobID)
			}
			all := keysUnder(t, ctx, store, claimcheck.PrefixPayloads)
			if len(all) != len(liveKeys)+2 {
				t.Fatalf("%d objects after the failed enqueue, want the live job's %d and the first two attachments", len(all), len(liveKeys))
			}

			// Within the grace period nothing goes: the orphans' check-in
			// intents are live.
			rep, err := sweep.Sweep(ctx, sweep.Options{Store: store, DB: p.DB()})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Removed != 0 {
				t.Fatalf("a sweep within the grace period removed %d", rep.Removed)
			}
			// Two days later, by the sweeper's clock and the database's.
			if _, err := p.DB().ExecContext(ctx, `UPDATE claimcheck_intent SET recorded_ms = recorded_ms - $1`, (48 * time.Hour).Milliseconds()); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(48 * time.Hour)
			rep, err = sweep.Sweep(ctx, sweep.Options{Store: store, DB: p.DB(), Now: func() time.Time { return later }})
			if err != nil {
				t.Fatal(err)
			}
			logReport(t, "sweep two days after a consignment whose third attachment failed", rep)
			if rep.RemovedByReason[sweep.Orphan] != 2 {
				t.Errorf("removed %v, want the first two attachments as orphans", rep.RemovedByReason)
			}
			left := keysUnder(t, ctx, store, claimcheck.PrefixPayloads)
			if strings.Join(left, " ") != strings.Join(liveKeys, " ") {
				t.Errorf("after the sweep %d objects are left, want the live job's %d", len(left), len(liveKeys))
			}
			for _, e := range rep.Entries {
				if e.Removed && e.Reason == sweep.Orphan && strings.Contains(strings.Join(liveKeys, " "), e.Key) {
					t.Errorf("a document of the live job was removed: %s", e.Object)
				}
			}
		})
	}
}

// TestAttachmentsRetention: on a file store, whose expiry the sweeper
// enforces, the documents of a pending consignment job are kept past
// their expiry; once the job is done, they expire with its manifest.
func TestAttachmentsRetention(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	res, err := b.pipe.Enqueue(b.ctx, "customs", "acme", strings.NewReader("consignment 43"),
		&pipeline.EnqueueOptions{Attachments: consignment(t, "pixel.pdf", "refcard-a4.pdf", "bash.pdf")})
	if err != nil {
		t.Fatal(err)
	}
	docs := keysUnder(t, b.ctx, b.store, claimcheck.PrefixPayloads)
	if len(docs) != 5 { // manifest, main payload, three attachments
		t.Fatalf("%d objects, want 5", len(docs))
	}
	later := time.Now().Add(10 * 24 * time.Hour)
	opts := sweep.Options{Now: func() time.Time { return later }, Expiry: map[string]time.Duration{claimcheck.PrefixPayloads: 7 * 24 * time.Hour}}
	rep := b.sweep(t, opts)
	logReport(t, "10 days later, the consignment job pending", rep)
	if rep.Removed != 0 {
		t.Fatalf("removed %d documents of a pending job", rep.Removed)
	}
	b.work(t, "customs", func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) { return nil, nil })
	if s := b.state(t, res.JobID); s != "completed" {
		t.Fatalf("job %s", s)
	}
	rep = b.sweep(t, opts)
	logReport(t, "10 days later, the consignment job completed", rep)
	if rep.RemovedByReason[sweep.Expired] != 5 {
		t.Errorf("removed %v, want the 5 objects expired", rep.RemovedByReason)
	}
}
