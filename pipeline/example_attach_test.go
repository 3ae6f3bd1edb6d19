package pipeline_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// Example_consignment is the README's consignment: one job carries a
// consignment's label, commercial invoice and customs declaration (three
// corpus PDFs), so they cannot fail independently. Its ticket is its
// manifest's, within the 512-byte budget; the handler gets each document
// by name, verified.
func Example_consignment() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-example-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "objects"), &claimcheck.Options{SpoolDir: dir})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: "sqlite://" + filepath.Join(dir, "jobs.db"), Store: store})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	// Producer: every document is stored before the job exists; if one
	// fails, there is no job.
	open := func(name string) *os.File {
		f, err := os.Open(filepath.Join("..", "testdata", "pdf", name))
		if err != nil {
			panic(err)
		}
		return f
	}
	label, invoice, declaration := open("pixel.pdf"), open("refcard-a4.pdf"), open("bash.pdf")
	defer label.Close()
	defer invoice.Close()
	defer declaration.Close()
	res, err := p.Enqueue(ctx, "customs", "acme", strings.NewReader(`{"consignment":42}`), &pipeline.EnqueueOptions{
		Attachments: []pipeline.Attachment{
			{Name: "label.pdf", Body: label, ContentType: "application/pdf"},
			{Name: "commercial-invoice.pdf", Body: invoice, ContentType: "application/pdf"},
			{Name: "customs-declaration.pdf", Body: declaration, ContentType: "application/pdf"},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("ticket within budget:", res.TicketBytes <= claimcheck.MaxTicketBytes)

	// Worker: each attachment is fetched and verified before the handler runs.
	customs := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		var lines []string
		for name, doc := range job.Attachments {
			r, err := doc.Open(ctx) // verified bytes only
			if err != nil {
				return nil, err
			}
			h := sha256.New()
			n, err := io.Copy(h, r)
			r.Close()
			if err != nil {
				return nil, err
			}
			lines = append(lines, fmt.Sprintf("%s: %d bytes, sha256 %x…", name, n, h.Sum(nil)[:4]))
		}
		slices.Sort(lines)
		return &claimcheck.Result{Body: strings.NewReader(strings.Join(lines, "\n")), ContentType: "text/plain"}, nil
	})
	if err := p.Work(ctx, pipeline.WorkOptions{Handlers: map[string]claimcheck.Handler{"customs": customs}, UntilEmpty: true}); err != nil {
		panic(err)
	}
	out, _, err := p.OpenResult(ctx, res.JobID)
	if err != nil {
		panic(err)
	}
	defer out.Close()
	report, _ := io.ReadAll(out)
	fmt.Println(string(report))
	// Output:
	// ticket within budget: true
	// commercial-invoice.pdf: 129539 bytes, sha256 7de62b24…
	// customs-declaration.pdf: 399798 bytes, sha256 ebd1361f…
	// label.pdf: 2771 bytes, sha256 10da938e…
}
