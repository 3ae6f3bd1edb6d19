package claimcheck_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
)

// claimText claims t from store and returns its verified bytes, the steps
// Example shows one by one.
func claimText(ctx context.Context, store *claimcheck.Store, t *claimcheck.Ticket) string {
	p, err := store.Claim(t)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	r, err := p.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		log.Fatal(err)
	}
	return string(b)
}

// fileStore opens a file store with opts in a new temporary directory,
// dir; done closes it and removes the directory. ExampleOpenStore shows
// the steps.
func fileStore(ctx context.Context, opts *claimcheck.Options) (store *claimcheck.Store, dir string, done func()) {
	dir, err := os.MkdirTemp("", "claimcheck-example-")
	if err != nil {
		log.Fatal(err)
	}
	store, err = claimcheck.OpenStore(ctx, "file://"+dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	return store, dir, func() {
		store.Close()
		os.RemoveAll(dir)
	}
}

// ExampleOpenStore opens the file store, a directory used as a bucket: a
// payload checked in lands under payloads/TENANT/ as one file, named by
// its content, and the ticket holds its key, size and SHA-256.
func ExampleOpenStore() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "claimcheck-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := claimcheck.OpenStore(ctx, "file://"+dir, &claimcheck.Options{AlwaysOffload: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("quarterly report"), nil)
	if err != nil {
		log.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "payloads", "acme", "*"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inline:", ticket.IsInline())
	fmt.Println("files under payloads/acme/:", len(files))
	fmt.Println("size:", ticket.Size)
	// Output:
	// inline: false
	// files under payloads/acme/: 1
	// size: 16
}

// ExampleParseTicket parses what a queue delivered. Anything that is not a
// well-formed ticket is refused with ErrTicketInvalid (a permanent
// failure: retrying cannot fix the message), before any store is asked.
func ExampleParseTicket() {
	ctx := context.Background()
	store, err := claimcheck.OpenStore(ctx, "mem://", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("hello"), nil)
	if err != nil {
		log.Fatal(err)
	}
	msg, err := ticket.Marshal()
	if err != nil {
		log.Fatal(err)
	}

	got, err := claimcheck.ParseTicket(msg)
	fmt.Println("parsed:", got.Tenant, got.Size, err)

	_, err = claimcheck.ParseTicket([]byte(`{"tenant":"acme","size":-1}`))
	fmt.Println("invalid:", errors.Is(err, claimcheck.ErrTicketInvalid), claimcheck.IsPermanent(err))
	// Output:
	// parsed: acme 5 <nil>
	// invalid: true true
}

// ExampleOptions_signTickets signs every ticket with a key derived from
// the deployment secret: a worker holding the same secret refuses a
// ticket altered on the way (here, its content type) with
// ErrTicketForbidden.
func ExampleOptions_signTickets() {
	ctx := context.Background()
	opts := &claimcheck.Options{Secret: []byte("a deployment secret of 16+ bytes"), SignTickets: true, AlwaysOffload: true}
	store, err := claimcheck.OpenStore(ctx, "mem://", opts)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("signed payload"), nil)
	if err != nil {
		log.Fatal(err)
	}

	if _, err := store.Claim(ticket); err != nil {
		log.Fatal(err)
	}
	fmt.Println("as signed: claimed")

	altered := *ticket
	altered.ContentType = "application/x-msdownload"
	_, err = store.Claim(&altered)
	fmt.Println("altered:", errors.Is(err, claimcheck.ErrTicketForbidden))
	// Output:
	// as signed: claimed
	// altered: true
}

// ExampleStore_CheckInManifest checks in a job's named documents
// (attachments) and one manifest that lists their tickets: the job's
// ticket is the manifest's, however many documents there are, and the
// worker reads the manifest back to reach each one.
func ExampleStore_CheckInManifest() {
	ctx := context.Background()
	store, err := claimcheck.OpenStore(ctx, "mem://", &claimcheck.Options{AlwaysOffload: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	m := &claimcheck.Manifest{Version: claimcheck.ManifestVersion}
	for _, doc := range []struct{ name, body string }{{"contract.txt", "terms"}, {"annex-1.txt", "prices"}} {
		t, err := store.CheckIn(ctx, "acme", strings.NewReader(doc.body), nil)
		if err != nil {
			log.Fatal(err)
		}
		m.Attachments = append(m.Attachments, claimcheck.Attachment{Name: doc.name, Ticket: t})
	}
	jobTicket, err := store.CheckInManifest(ctx, "acme", m, nil)
	if err != nil {
		log.Fatal(err)
	}

	// The worker's side.
	got, err := store.ReadManifest(ctx, jobTicket)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("attachments:", got.Names())
	fmt.Println("invalid name:", claimcheck.ValidateAttachmentName("../etc/passwd") != nil)
	// Output:
	// attachments: [contract.txt annex-1.txt]
	// invalid name: true
}

// ExampleStore_Work runs a worker's handler on a job: the payload is
// claimed and verified before the handler runs, and what the handler
// returns is checked in as the job's result, whose ticket Work returns.
func ExampleStore_Work() {
	ctx := context.Background()
	store, err := claimcheck.OpenStore(ctx, "mem://", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("make me loud"), nil)
	if err != nil {
		log.Fatal(err)
	}

	upper := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		r, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return &claimcheck.Result{Body: strings.NewReader(strings.ToUpper(string(b))), ContentType: "text/plain"}, nil
	})
	job := &claimcheck.Job{ID: "1", Kind: "shout", Tenant: "acme", Attempt: 1}
	result, err := store.Work(ctx, job, ticket, upper)
	if err != nil {
		log.Fatal(err)
	}

	fmt.Println(claimText(ctx, store, result))
	// Output:
	// MAKE ME LOUD
}

// ExampleIsPermanent classifies failures as the worker does: a handler
// marks a failure that retrying cannot fix with Permanent (the job is
// dead-lettered at once), unreachable infrastructure waits without
// spending an attempt, and anything else is retried with backoff.
func ExampleIsPermanent() {
	bad := fmt.Errorf("convert: %w", claimcheck.Permanent(errors.New("unsupported format")))
	down := fmt.Errorf("fetch: %w", claimcheck.ErrUnavailable)
	flaky := errors.New("upstream answered 503")

	for _, err := range []error{bad, down, flaky} {
		fmt.Printf("permanent=%t class=%s\n", claimcheck.IsPermanent(err), claimcheck.Classify(err))
	}
	// Output:
	// permanent=true class=permanent
	// permanent=false class=unavailable
	// permanent=false class=transient
}

// ExampleRetryPolicy_Decide shows what follows each failure of a job
// allowed three attempts: transient failures back off (Base doubling,
// jitter included in Delay) and the third is dead; a permanent failure is
// dead at once.
func ExampleRetryPolicy_Decide() {
	p := claimcheck.RetryPolicy{MaxAttempts: 3, Base: time.Second}
	now := time.Now()
	for attempt := 1; attempt <= 3; attempt++ {
		d := p.Decide(errors.New("timeout"), attempt, 0, time.Time{}, now)
		fmt.Printf("attempt %d: dead=%t backoff=%v\n", attempt, d.Dead, p.Backoff(attempt))
	}
	d := p.Decide(claimcheck.Permanent(errors.New("corrupt")), 1, 0, time.Time{}, now)
	fmt.Printf("permanent on attempt 1: dead=%t\n", d.Dead)
	// Output:
	// attempt 1: dead=false backoff=1s
	// attempt 2: dead=false backoff=2s
	// attempt 3: dead=true backoff=4s
	// permanent on attempt 1: dead=true
}

// ExampleCauseOf names the cause of a failure for an operator: the class
// (here ErrConnRefused) and a phrase naming the endpoint, never an object
// key.
func ExampleCauseOf() {
	err := fmt.Errorf("check in: %w", &net.OpError{
		Op: "dial", Net: "tcp",
		Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8333},
		Err:  os.NewSyscallError("connect", syscall.ECONNREFUSED),
	})
	why, cause := claimcheck.CauseOf(err)
	fmt.Println(why)
	fmt.Println(cause == claimcheck.ErrConnRefused)
	// Output:
	// connection refused by 127.0.0.1:8333
	// true
}

// ExampleStore_SealedKey seals payloads with a keeper (envelope
// encryption, here a local key; in a deployment gocloud's KMS keepers):
// the object at rest is sealed and names the key id, and a claim opens it.
func ExampleStore_SealedKey() {
	ctx := context.Background()
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		log.Fatal(err)
	}
	keeper := localsecrets.NewKeeper(key)
	defer keeper.Close()

	id := claimcheck.LocalKeyID(key[:]) // identifies the key without revealing it
	store, _, done := fileStore(ctx, &claimcheck.Options{Keeper: keeper, KeeperID: id, AlwaysOffload: true})
	defer done()
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("secret plans"), nil)
	if err != nil {
		log.Fatal(err)
	}
	sealed, keyID, err := store.SealedKey(ctx, ticket.Key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sealed:", sealed, "under our key:", keyID == id)

	fmt.Println(claimText(ctx, store, ticket))
	// Output:
	// sealed: true under our key: true
	// secret plans
}

// ExampleRetryWindow is the longest a job can take from its first attempt
// to its last: the outage budget of the retry policy, and what object
// retention must cover (ComputeRetention's RetryWindow).
func ExampleRetryWindow() {
	w := claimcheck.RetryWindow(claimcheck.DefaultMaxAttempts, 30*time.Minute, 2*time.Minute)
	fmt.Println(claimcheck.DefaultMaxAttempts, "attempts of 30 min, lease 2 min:", w)
	// Output:
	// 5 attempts of 30 min, lease 2 min: 3h10m0s
}

// ExampleStore_Claim_missing claims a ticket whose object is gone
// (removed by retention or by hand): ErrPayloadMissing, a permanent
// failure, so the job is dead-lettered at once rather than retried.
func ExampleStore_Claim_missing() {
	ctx := context.Background()
	store, dir, done := fileStore(ctx, &claimcheck.Options{AlwaysOffload: true})
	defer done()
	ticket, err := store.CheckIn(ctx, "acme", strings.NewReader("short-lived"), nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "payloads")); err != nil {
		log.Fatal(err)
	}

	p, err := store.Claim(ticket)
	if err == nil {
		_, err = p.Open(ctx)
	}
	fmt.Println(errors.Is(err, claimcheck.ErrPayloadMissing), claimcheck.IsPermanent(err), claimcheck.Reason(err))
	// Output:
	// true true payload-missing
}
