package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// README:begin (the README's library snippet, checked by TestREADMESnippet)

// enqueueAndWork checks invoice.pdf in, enqueues its ticket, and works
// every "render" job until none is left, all under dir.
func enqueueAndWork(ctx context.Context, dir string) error {
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.Join(dir, "objects"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	p, err := pipeline.Open(ctx, pipeline.Config{Database: "sqlite://" + filepath.Join(dir, "jobs.db"), Store: store})
	if err != nil {
		return err
	}
	defer p.Close()

	f, err := os.Open("invoice.pdf")
	if err != nil {
		return err
	}
	defer f.Close()
	// Producer: the payload goes to the store, its ticket into the job.
	if _, err := p.Enqueue(ctx, "render", "acme", f, &pipeline.EnqueueOptions{IdempotencyKey: "invoice-42"}); err != nil {
		return err
	}

	// Worker: the handler sees verified bytes only.
	return p.Work(ctx, pipeline.WorkOptions{
		Handlers: map[string]claimcheck.Handler{
			"render": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
				r, err := job.Payload.Open(ctx)
				if err != nil {
					return nil, err
				}
				defer r.Close()
				out, err := render(r)
				if err != nil {
					return nil, claimcheck.Permanent(err) // dead-letter now; plain errors retry
				}
				return &claimcheck.Result{Body: out, ContentType: "application/json"}, nil
			}),
		},
		UntilEmpty: true,
	})
}

// README:end

// render stands in for an application's handler: a JSON line with the
// payload's size.
func render(r io.Reader) (io.Reader, error) {
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, err
	}
	return strings.NewReader(fmt.Sprintf(`{"bytes":%d}`, n)), nil
}

// Example_readme runs the README's library snippet on a corpus PDF.
func Example_readme() {
	dir, err := os.MkdirTemp("", "claimcheck-readme-*")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	pdf, err := os.ReadFile("../testdata/pdf/pixel.pdf")
	if err != nil {
		panic(err)
	}
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	if err := os.Chdir(dir); err != nil {
		panic(err)
	}
	if err := os.WriteFile("invoice.pdf", pdf, 0o644); err != nil {
		panic(err)
	}
	if err := enqueueAndWork(context.Background(), dir); err != nil {
		panic(err)
	}
	fmt.Println("worked")
	// Output: worked
}

// TestREADMESnippet: the README's Go block is this file's snippet, line for
// line, so the README cannot show code that does not compile or run.
func TestREADMESnippet(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n```go\n(.*?)\n```\n").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no go block")
	}
	self, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, snippet, _ := bytes.Cut(self, []byte("// README:begin (the README's library snippet, checked by TestREADMESnippet)\n\n"))
	snippet, _, _ = bytes.Cut(snippet, []byte("\n\n// README:end"))
	if got, want := strings.TrimSpace(string(m[1])), strings.TrimSpace(string(snippet)); got != want {
		t.Errorf("README.md's go block differs from example_readme_test.go's snippet; paste it from there:\n%s", want)
	}
}
