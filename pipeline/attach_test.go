package pipeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen/dbtest"
)

// consignment is a consignment's paperwork: three corpus PDFs.
var consignment = []struct{ name, file string }{
	{"label.pdf", "pixel.pdf"},
	{"commercial-invoice.pdf", "refcard-a4.pdf"},
	{"customs-declaration.pdf", "bash.pdf"},
}

// consignmentFiles opens the consignment's PDFs as attachments (closed
// when t ends) and returns the SHA-256 of each by name.
func consignmentFiles(t *testing.T) ([]Attachment, map[string]string) {
	t.Helper()
	var atts []Attachment
	sums := map[string]string{}
	for _, c := range consignment {
		path := filepath.Join("..", "testdata", "pdf", c.file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(data)
		sums[c.name] = hex.EncodeToString(s[:])
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		atts = append(atts, Attachment{Name: c.name, Body: f, ContentType: "application/pdf"})
	}
	return atts, sums
}

// attachmentHandler records the SHA-256 of every attachment it reads
// (verified bytes) and the main payload.
type attachmentHandler struct {
	mu   sync.Mutex
	seen map[string]string
	main string
}

func (h *attachmentHandler) Handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]string{}
	}
	r, err := job.Payload.Open(ctx)
	if err != nil {
		return nil, err
	}
	main, _ := io.ReadAll(r)
	r.Close()
	h.main = string(main)
	for name, p := range job.Attachments {
		r, err := p.Open(ctx)
		if err != nil {
			return nil, err
		}
		s := sha256.New()
		_, err = io.Copy(s, r)
		r.Close()
		if err != nil {
			return nil, err
		}
		h.seen[name] = hex.EncodeToString(s.Sum(nil))
	}
	return nil, nil
}

// TestConsignment: a job of three attachments has one ticket within the
// budget, a registry row for each document, and its handler sees all
// three verified; the same documents under the same idempotency key are a
// duplicate, other documents a conflict.
func TestConsignment(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), nil)
		atts, sums := consignmentFiles(t)
		res, err := b.p.Enqueue(b.ctx, "customs", "acme", strings.NewReader("consignment 42"), &EnqueueOptions{Attachments: atts, IdempotencyKey: "consignment-42"})
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		t.Logf("consignment job %d: ticket of %d bytes (3 attachments, manifest of %d bytes)", res.JobID, res.TicketBytes, res.Ticket.Size)
		if res.TicketBytes > claimcheck.MaxTicketBytes || !res.Ticket.Manifest {
			t.Fatalf("ticket of %d bytes, manifest %t", res.TicketBytes, res.Ticket.Manifest)
		}
		var rows int
		if err := b.p.DB().QueryRowContext(b.ctx, `SELECT COUNT(*) FROM claimcheck_claim WHERE job_id = $1`, res.JobID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 5 { // the manifest, the main payload, three attachments
			t.Errorf("%d registry rows, want 5", rows)
		}

		// The same documents again under the key: the first job.
		again, _ := consignmentFiles(t)
		dup, err := b.p.Enqueue(b.ctx, "customs", "acme", strings.NewReader("consignment 42"), &EnqueueOptions{Attachments: again, IdempotencyKey: "consignment-42"})
		if err != nil || !dup.Duplicate || dup.JobID != res.JobID {
			t.Fatalf("same documents, same key: %+v, %v", dup, err)
		}
		other, _ := consignmentFiles(t)
		other[2].Body = strings.NewReader("another declaration")
		_, err = b.p.Enqueue(b.ctx, "customs", "acme", strings.NewReader("consignment 42"), &EnqueueOptions{Attachments: other, IdempotencyKey: "consignment-42"})
		if !errors.Is(err, ErrIdempotencyConflict) {
			t.Fatalf("other documents, same key: %v", err)
		}

		h := &attachmentHandler{}
		b.work(t, map[string]claimcheck.Handler{"customs": h})
		if j := b.get(t, res.JobID); j.State != "completed" {
			t.Fatalf("job %s: %s", j.State, j.Error)
		}
		if h.main != "consignment 42" {
			t.Errorf("main payload %q", h.main)
		}
		for name, sum := range sums {
			if h.seen[name] != sum {
				t.Errorf("attachment %s: the handler read sha256 %q, want %s", name, h.seen[name], sum)
			}
		}
		if len(h.seen) != 3 {
			t.Errorf("the handler saw %d attachments, want 3", len(h.seen))
		}
	})
}

// TestConsignmentAttachmentMissing: an attachment deleted before the job
// runs kills it on attempt 1 as payload-missing, naming the attachment
// (never its key), without running the handler; dead replay refuses it.
func TestConsignmentAttachmentMissing(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, newDB func(testing.TB) string) {
		b := setup(t, newDB(t), nil)
		atts, _ := consignmentFiles(t)
		res, err := b.p.Enqueue(b.ctx, "customs", "acme", nil, &EnqueueOptions{Attachments: atts})
		if err != nil {
			t.Fatal(err)
		}
		m, err := b.store.ReadManifest(b.ctx, res.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		if m.Payload != nil {
			t.Fatal("a job of attachments only has a main payload")
		}
		gone := m.Attachments[2].Ticket
		if err := b.store.Bucket().Delete(b.ctx, gone.Key); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		b.work(t, map[string]claimcheck.Handler{"customs": rec})
		j := b.get(t, res.JobID)
		t.Logf("job %d: state %s, attempt %d, reason %s: %s", j.ID, j.State, j.Attempts, j.Reason, j.Error)
		if !j.Dead || j.Attempts != 1 || j.Reason != claimcheck.ReasonPayloadMissing {
			t.Fatalf("job %s after %d attempts, reason %q", j.State, j.Attempts, j.Reason)
		}
		if !strings.Contains(j.Error, `attachment "customs-declaration.pdf"`) {
			t.Errorf("error does not name the attachment: %s", j.Error)
		}
		if strings.Contains(j.Error, gone.Key) || strings.Contains(j.Error, gone.SHA256) {
			t.Errorf("error names the key or digest: %s", j.Error)
		}
		if rec.count() != 0 {
			t.Error("the handler ran")
		}
		_, err = b.p.Replay(b.ctx, res.JobID)
		if !errors.Is(err, ErrPayloadGone) || !errors.Is(err, claimcheck.ErrPayloadMissing) || !strings.Contains(err.Error(), `attachment "customs-declaration.pdf"`) {
			t.Fatalf("Replay: %v", err)
		}
		if strings.Contains(err.Error(), gone.Key) {
			t.Errorf("Replay's error names the key: %v", err)
		}
	})
}

// TestEnqueueAttachmentsRefused: bad attachment names are refused before
// anything is stored.
func TestEnqueueAttachmentsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.SQLite(t), nil)
	for _, tc := range []struct {
		atts []Attachment
		want string
	}{
		{[]Attachment{{Name: "../etc/passwd", Body: strings.NewReader("x")}}, "path separator"},
		{[]Attachment{{Name: "a..b", Body: strings.NewReader("x")}}, `contains ".."`},
		{[]Attachment{{Name: "a.pdf", Body: strings.NewReader("x")}, {Name: "a.pdf", Body: strings.NewReader("y")}}, "given twice"},
		{[]Attachment{{Name: "a.pdf"}}, "has no body"},
	} {
		_, err := b.p.Enqueue(b.ctx, "customs", "acme", nil, &EnqueueOptions{Attachments: tc.atts})
		if !errors.Is(err, claimcheck.ErrTicketInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want ticket-invalid saying %q", tc.atts[0].Name, err, tc.want)
		}
	}
	_, err := b.p.Enqueue(b.ctx, "customs", "acme", nil, nil)
	if !errors.Is(err, claimcheck.ErrTicketInvalid) {
		t.Errorf("no payload and no attachments: %v", err)
	}
	n := 0
	it := b.store.Bucket().List(&blob.ListOptions{Prefix: claimcheck.PrefixPayloads})
	for {
		if _, err := it.Next(b.ctx); err != nil {
			break
		}
		n++
	}
	if n != 0 {
		t.Errorf("%d objects stored by refused enqueues", n)
	}
}
