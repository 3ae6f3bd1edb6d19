package broker_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/broker"
	"github.com/claimcheck/claimcheck/broker/brokertest"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"
)

const pointerBucket = "claimcheck-interop"

// consumeOnce publishes m to a fresh Fake, consumes it with opts and
// returns the outcome and how often the handler ran; the handler checks
// that it sees want's bytes.
func consumeOnce(t *testing.T, store *claimcheck.Store, m broker.Message, opts broker.ConsumeOptions, want []byte) (broker.Outcome, int64) {
	t.Helper()
	tr := brokertest.NewFake(256 << 10)
	if err := tr.Publish(t.Context(), []broker.Message{m}); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	opts.Handlers = map[string]claimcheck.Handler{"pdf": claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		runs.Add(1)
		r, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		got, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(got, want) {
			t.Errorf("handler saw %d bytes, not the %d bytes written", len(got), len(want))
		}
		return nil, nil
	})}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var out broker.Outcome
	opts.OnDone = func(_ *broker.Delivery, o broker.Outcome) { out = o; cancel() }
	opts.OnError = func(err error) { t.Errorf("consume: %v", err) }
	if err := broker.Consume(ctx, tr, store, opts); err != nil {
		t.Fatal(err)
	}
	if out.Action == "" {
		t.Fatal("no delivery settled")
	}
	return out, runs.Load()
}

// TestConsumeAWSMessages: messages as the AWS extended clients build them
// (pointer body and marker attribute, optionally inside an SNS envelope)
// are claimed by Consume; what cannot be verified or recognised is
// dead-lettered on attempt 1 and never reaches a handler.
func TestConsumeAWSMessages(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	pdf, err := os.ReadFile("../testdata/pdf/bash.pdf")
	if err != nil {
		t.Fatal(err)
	}
	// The Java client uploads the payload under a random UUID key, then
	// sends the pointer; we do the same.
	const foreignKey = "6f1f3c2e-7b0e-4c39-9d1e-5f9a8f0b2c41"
	if err := store.Bucket().WriteAll(ctx, foreignKey, pdf, nil); err != nil {
		t.Fatal(err)
	}
	size := strconv.Itoa(len(pdf))
	javaBody := []byte(`["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"` + pointerBucket + `","s3Key":"` + foreignKey + `"}]`)
	pythonLegacy := []byte(`["com.amazon.sqs.javamessaging.MessageS3Pointer", {"s3BucketName": "` + pointerBucket + `", "s3Key": "` + foreignKey + `"}]`)
	adopt := broker.ConsumeOptions{DefaultKind: "pdf", PointerBucket: pointerBucket, AdoptTenant: "aws"}

	t.Run("JavaPointerAdopted", func(t *testing.T) {
		o, runs := consumeOnce(t, store, broker.Message{Body: javaBody, Attributes: map[string]string{broker.AttrPayloadSize: size}}, adopt, pdf)
		sum := sha256.Sum256(pdf)
		if o.Action != broker.Acked || runs != 1 || o.Ticket == nil || o.Ticket.SHA256 != hex.EncodeToString(sum[:]) || o.Tenant != "aws" {
			t.Fatalf("outcome %+v, handler ran %d times", o, runs)
		}
	})
	t.Run("PythonLegacyPointerViaSNS", func(t *testing.T) {
		env := broker.SNSWrap(t, string(pythonLegacy), map[string][2]string{broker.AttrLegacyPayloadSize: {"Number", size}})
		o, runs := consumeOnce(t, store, broker.Message{Body: env}, adopt, pdf)
		if o.Action != broker.Acked || runs != 1 {
			t.Fatalf("outcome %+v, handler ran %d times", o, runs)
		}
	})
	t.Run("NpmS3PayloadAdopted", func(t *testing.T) {
		// sns-sqs-big-payload's default body: no attribute, no size.
		body := `{"S3Payload":{"Id":"6f1f3c2e","Bucket":"` + pointerBucket + `","Key":"` + foreignKey + `","Location":"http://s3/` + foreignKey + `"}}`
		o, runs := consumeOnce(t, store, broker.Message{Body: []byte(body)}, adopt, pdf)
		sum := sha256.Sum256(pdf)
		if o.Action != broker.Acked || runs != 1 || o.Ticket == nil || o.Ticket.SHA256 != hex.EncodeToString(sum[:]) || o.Tenant != "aws" {
			t.Fatalf("outcome %+v, handler ran %d times", o, runs)
		}
	})
	dead := func(t *testing.T, m broker.Message, opts broker.ConsumeOptions, reason string) {
		t.Helper()
		o, runs := consumeOnce(t, store, m, opts, pdf)
		if o.Action != broker.DeadLettered || o.Attempt != 1 || o.Reason != reason || runs != 0 {
			t.Fatalf("outcome %s on attempt %d, reason %q (want dead-lettered, 1, %q); handler ran %d times; err %v", o.Action, o.Attempt, o.Reason, reason, runs, o.Err)
		}
	}
	marker := map[string]string{broker.AttrPayloadSize: size}
	t.Run("ForeignPointerRefusedWithoutAdoption", func(t *testing.T) {
		dead(t, broker.Message{Body: javaBody, Attributes: marker}, broker.ConsumeOptions{DefaultKind: "pdf", PointerBucket: pointerBucket}, "ticket-invalid")
	})
	t.Run("PointerRefusedWithoutBucket", func(t *testing.T) {
		dead(t, broker.Message{Body: javaBody, Attributes: marker}, broker.ConsumeOptions{DefaultKind: "pdf"}, "ticket-invalid")
	})
	t.Run("OtherBucket", func(t *testing.T) {
		dead(t, broker.Message{Body: javaBody, Attributes: marker}, broker.ConsumeOptions{DefaultKind: "pdf", PointerBucket: "another", AdoptTenant: "aws"}, "ticket-invalid")
	})
	t.Run("NoKindNoDefault", func(t *testing.T) {
		dead(t, broker.Message{Body: javaBody, Attributes: marker}, broker.ConsumeOptions{PointerBucket: pointerBucket, AdoptTenant: "aws"}, "ticket-invalid")
	})
	t.Run("WrongSizeMarker", func(t *testing.T) {
		dead(t, broker.Message{Body: javaBody, Attributes: map[string]string{broker.AttrPayloadSize: strconv.Itoa(len(pdf) - 1)}}, adopt, "payload-corrupt")
		dead(t, broker.Message{Body: javaBody, Attributes: map[string]string{broker.AttrPayloadSize: strconv.Itoa(len(pdf) + 1)}}, adopt, "payload-corrupt")
	})
	t.Run("MissingForeignObject", func(t *testing.T) {
		body := bytes.Replace(javaBody, []byte(foreignKey), []byte("no-such-object"), 1)
		dead(t, broker.Message{Body: body, Attributes: marker}, adopt, "payload-missing")
	})
	t.Run("ClaimcheckAreaNotAdoptable", func(t *testing.T) {
		// Another tenant's payload, named by a foreign pointer: refused
		// before anything is read.
		victim, err := store.CheckIn(ctx, "victim", bytes.NewReader(pdf), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{victim.Key, "results/victim/" + victim.SHA256[:2] + "/" + victim.SHA256} {
			body := bytes.Replace(javaBody, []byte(foreignKey), []byte(key), 1)
			dead(t, broker.Message{Body: body, Attributes: marker}, adopt, "ticket-forbidden")
		}
	})
	t.Run("Garbage", func(t *testing.T) {
		for _, body := range []string{"", "%PDF-1.7 raw bytes", `{"hello":"world"}`, `["x"]`, `[1,2]`} {
			dead(t, broker.Message{Body: []byte(body), Attributes: map[string]string{broker.AttrKind: "pdf"}}, adopt, "ticket-invalid")
		}
	})

	// A pointer claimcheck writes names the message's own copy of a
	// claimcheck payload and carries its digest: it is claimed and verified
	// like the ticket.
	tk, err := store.CheckIn(ctx, "acme", bytes.NewReader(pdf), &claimcheck.CheckInOptions{ContentType: "application/pdf"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := broker.NewPointer(ctx, store, pointerBucket, tk)
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Message(map[string]string{broker.AttrKind: "pdf"})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ClaimcheckPointerVerified", func(t *testing.T) {
		o, runs := consumeOnce(t, store, m, broker.ConsumeOptions{PointerBucket: pointerBucket}, pdf)
		if o.Action != broker.Acked || runs != 1 || o.Ticket.Key != p.Key || !claimcheck.PointerKey(p.Key) || o.Tenant != "acme" {
			t.Fatalf("outcome %+v, handler ran %d times", o, runs)
		}
	})
	t.Run("ClaimcheckPointerAlteredDigest", func(t *testing.T) {
		bad := broker.Message{Body: m.Body, Attributes: map[string]string{}}
		for k, v := range m.Attributes {
			bad.Attributes[k] = v
		}
		d := []byte(tk.SHA256)
		d[0] ^= 1
		bad.Attributes[broker.AttrSHA256] = string(d)
		o, runs := consumeOnce(t, store, bad, broker.ConsumeOptions{PointerBucket: pointerBucket}, pdf)
		if o.Action != broker.DeadLettered || runs != 0 || !(errors.Is(o.Err, claimcheck.ErrTicketInvalid) || errors.Is(o.Err, claimcheck.ErrPayloadCorrupt)) {
			t.Fatalf("outcome %s %v, handler ran %d times", o.Action, o.Err, runs)
		}
	})
	t.Run("TicketViaSNS", func(t *testing.T) {
		tm, err := broker.NewMessage("pdf", tk)
		if err != nil {
			t.Fatal(err)
		}
		env := broker.SNSWrap(t, string(tm.Body), map[string][2]string{broker.AttrKind: {"String", "pdf"}})
		o, runs := consumeOnce(t, store, broker.Message{Body: env}, broker.ConsumeOptions{}, pdf)
		if o.Action != broker.Acked || runs != 1 {
			t.Fatalf("outcome %+v, handler ran %d times", o, runs)
		}
	})
}

// extendCounter counts Extend calls on a Fake.
type extendCounter struct {
	*brokertest.Fake
	n atomic.Int64
}

func (e *extendCounter) Extend(ctx context.Context, d *broker.Delivery, by time.Duration) error {
	e.n.Add(1)
	return e.Fake.Extend(ctx, d, by)
}

// TestConsumeExtendsLongJobs: while a handler runs longer than the lease,
// Consume keeps extending the delivery's lease (every Lease/3); a quick
// handler causes no extension.
func TestConsumeExtendsLongJobs(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tk, err := store.CheckIn(ctx, "acme", bytes.NewReader([]byte("long job")), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sleep   time.Duration
		min     int64
		max     int64
		comment string
	}{{600 * time.Millisecond, 4, 8, "long"}, {0, 0, 0, "quick"}} {
		tr := &extendCounter{Fake: brokertest.NewFake(64 << 10)}
		m, err := broker.NewMessage("slow", tk)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Publish(ctx, []broker.Message{m}); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = broker.Consume(cctx, tr, store, broker.ConsumeOptions{
			Lease: 300 * time.Millisecond,
			Handlers: map[string]claimcheck.Handler{"slow": claimcheck.HandlerFunc(func(ctx context.Context, _ *claimcheck.Job) (*claimcheck.Result, error) {
				time.Sleep(tc.sleep)
				return nil, nil
			})},
			OnDone: func(*broker.Delivery, broker.Outcome) { cancel() },
		})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if n := tr.n.Load(); n < tc.min || n > tc.max {
			t.Errorf("%s handler: %d extensions, want %d to %d", tc.comment, n, tc.min, tc.max)
		}
	}
}

// TestConsumeLeavesUnservedTenants: a consumer whose store serves only
// acme leaves globex's message without running a handler or spending an
// attempt; a consumer serving globex then completes it on attempt 1.
func TestConsumeLeavesUnservedTenants(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	open := func(tenants ...string) *claimcheck.Store {
		s, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool"), Tenants: tenants})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	tk, err := open().CheckIn(ctx, "globex", bytes.NewReader([]byte("globex's document")), nil)
	if err != nil {
		t.Fatal(err)
	}
	leftThenWorked(t, tk, open("acme"), open("globex"), "acme consumer on globex's message", "globex consumer")
}

// TestConsumeLeavesOtherStores: a consumer whose store is named us leaves
// a ticket of store eu (a worker pinned to another region) without
// fetching it, running a handler or spending an attempt; a consumer with
// store eu then completes it on attempt 1 (docs/stores.md, "Named
// stores").
func TestConsumeLeavesOtherStores(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	open := func(name string) *claimcheck.Store {
		s, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, name)), &claimcheck.Options{Name: name, SpoolDir: filepath.Join(dir, "spool"), AlwaysOffload: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	tk, err := open("eu").CheckIn(ctx, "acme", bytes.NewReader([]byte("eu's document")), nil)
	if err != nil {
		t.Fatal(err)
	}
	leftThenWorked(t, tk, open("us"), open("eu"), "us consumer on eu's message", "eu consumer")
}

// leftThenWorked publishes tk's message on a fresh fake broker and
// consumes it with wrong, which must release it without running the
// handler (nor spending an attempt), then with right, which must ack it on
// attempt 1, running the handler once.
func leftThenWorked(t *testing.T, tk *claimcheck.Ticket, wrong, right *claimcheck.Store, wrongWho, rightWho string) {
	t.Helper()
	ctx := t.Context()
	tr := brokertest.NewFake(64 << 10)
	m, err := broker.NewMessage("doc", tk)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Publish(ctx, []broker.Message{m}); err != nil {
		t.Fatal(err)
	}
	inbox := brokertest.NewMemInbox()
	consume := func(store *claimcheck.Store) (broker.Outcome, int) {
		var runs atomic.Int64
		var got broker.Outcome
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err := broker.Consume(cctx, tr, store, broker.ConsumeOptions{
			Inbox: inbox,
			Handlers: map[string]claimcheck.Handler{"doc": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) {
				runs.Add(1)
				return nil, nil
			})},
			OnDone: func(_ *broker.Delivery, o broker.Outcome) { got = o; cancel() },
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, int(runs.Load())
	}
	if o, runs := consume(wrong); o.Action != broker.Released || runs != 0 || o.Err != nil {
		t.Fatalf("%s: %s (err %v), handler ran %d times; want released, not run", wrongWho, o.Action, o.Err, runs)
	}
	if o, runs := consume(right); o.Action != broker.Acked || runs != 1 || o.Attempt != 1 {
		t.Fatalf("%s: %s attempt %d, handler ran %d times; want acked on attempt 1, run once", rightWho, o.Action, o.Attempt, runs)
	}
}

// TestPointerConsumerDeletesOnAck plays the AWS extended clients' default
// against a pointer claimcheck published: the consumer reads the object
// the pointer names and deletes it when it acknowledges the message (as
// the Java, Python and Go clients' DeleteMessage does). An ordinary job
// holding the same bytes still completes, since the pointer named the
// message's own copy and not the shared content-addressed object. Run on
// the file store and, when CLAIMCHECK_TEST_S3_URL is set, on the S3
// emulator (server-side copy, and a namespace the pointer's key must
// include).
func TestPointerConsumerDeletesOnAck(t *testing.T) {
	payload := make([]byte, 300<<10)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	// foreign is the AWS consumer's view of the bucket: raw keys, no
	// claimcheck namespace.
	type foreign struct {
		read   func(ctx context.Context, key string) ([]byte, error)
		delete func(ctx context.Context, key string) error
		exists func(ctx context.Context, key string) bool
	}
	run := func(t *testing.T, store *claimcheck.Store, bucket string, f foreign) {
		ctx := t.Context()
		tk, err := store.CheckIn(ctx, "acme", bytes.NewReader(payload), nil)
		if err != nil {
			t.Fatal(err)
		}
		if tk.IsInline() {
			t.Fatal("the payload travels inline: nothing to share")
		}
		job, err := broker.NewMessage("pdf", tk)
		if err != nil {
			t.Fatal(err)
		}
		shared := store.Namespace() + tk.Key
		var keys []string
		for range 2 {
			p, err := broker.NewPointer(ctx, store, bucket, tk)
			if err != nil {
				t.Fatal(err)
			}
			m, err := p.Message(nil)
			if err != nil {
				t.Fatal(err)
			}
			// What the AWS consumer reads: body and marker only.
			got, err := broker.ParsePointer(m.Body, map[string]string{broker.AttrPayloadSize: m.Attributes[broker.AttrPayloadSize]})
			if err != nil {
				t.Fatal(err)
			}
			if got.Key == shared {
				t.Fatalf("the pointer names the shared content-addressed object %s", tk.RedactedKey())
			}
			b, err := f.read(ctx, got.Key)
			if err != nil {
				t.Fatalf("the AWS consumer cannot read the pointed object: %v", err)
			}
			if d := sha256.Sum256(b); d != sum || int64(len(b)) != got.Size {
				t.Fatalf("the AWS consumer read %d bytes, sha256 %x; want %d bytes, %x", len(b), d[:6], got.Size, sum[:6])
			}
			if err := f.delete(ctx, got.Key); err != nil { // DeleteMessage's default
				t.Fatal(err)
			}
			if f.exists(ctx, got.Key) {
				t.Fatal("the pointed object survived the AWS consumer's delete")
			}
			keys = append(keys, got.Key)
		}
		if keys[0] == keys[1] {
			t.Fatal("two messages' pointers name one object")
		}
		if !f.exists(ctx, shared) {
			t.Fatal("the shared content-addressed object is gone")
		}
		o, runs := consumeOnce(t, store, job, broker.ConsumeOptions{}, payload)
		if o.Action != broker.Acked || runs != 1 {
			t.Fatalf("the ordinary job: %s (%v), handler ran %d times", o.Action, o.Err, runs)
		}
		t.Logf("pointer objects %s…, %s… deleted by the AWS consumer; the job holding sha256 %s completed (%s, attempt %d)",
			keys[0][:len(keys[0])-24], keys[1][:len(keys[1])-24], tk.DigestPrefix(), o.Action, o.Attempt)
	}
	t.Run("File", func(t *testing.T) {
		dir := t.TempDir()
		store, err := claimcheck.OpenStore(t.Context(), "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool")})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		b := store.Bucket()
		run(t, store, pointerBucket, foreign{
			read:   func(ctx context.Context, key string) ([]byte, error) { return b.ReadAll(ctx, key) },
			delete: func(ctx context.Context, key string) error { return b.Delete(ctx, key) },
			exists: func(ctx context.Context, key string) bool { ok, _ := b.Exists(ctx, key); return ok },
		})
	})
	t.Run("S3", func(t *testing.T) {
		bk := s3test.New(t, "pointer")
		store, err := claimcheck.OpenStore(t.Context(), bk.URL+"&prefix=team-a/", &claimcheck.Options{SpoolDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		c := bk.Client
		run(t, store, bk.Name, foreign{
			read: func(ctx context.Context, key string) ([]byte, error) {
				out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bk.Name), Key: aws.String(key)})
				if err != nil {
					return nil, err
				}
				defer out.Body.Close()
				return io.ReadAll(out.Body)
			},
			delete: func(ctx context.Context, key string) error {
				_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bk.Name), Key: aws.String(key)})
				return err
			},
			exists: func(ctx context.Context, key string) bool {
				_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bk.Name), Key: aws.String(key)})
				return err == nil
			},
		})
	})
}

// TestConsumeRawBodies: with RawTenant, a body in none of the known
// formats (what an AWS-format producer sends below its threshold: raw
// text, the npm package's JSON) reaches the handler as the payload itself,
// byte for byte, inside an SNS envelope too, inline or, above the inline
// threshold, as an object; a malformed ticket or pointer is still
// dead-lettered on attempt 1, never handed over as a payload.
func TestConsumeRawBodies(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	store, err := claimcheck.OpenStore(ctx, "file://"+filepath.ToSlash(filepath.Join(dir, "objects")), &claimcheck.Options{SpoolDir: filepath.Join(dir, "spool")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	raw := broker.ConsumeOptions{DefaultKind: "pdf", RawTenant: "aws", PointerBucket: pointerBucket}
	big := bytes.Repeat([]byte("a raw body above the inline threshold. "), 5000)
	for name, body := range map[string][]byte{
		"Text":      []byte("%PDF-1.7 raw bytes"),
		"NpmJSON":   []byte(`{"hello":"world","n":[1,2,3]}`),
		"JSONArray": []byte(`[1,2,3]`),
		"NotJSON":   []byte(`{not json`),
		"Large":     big,
	} {
		t.Run(name, func(t *testing.T) {
			o, runs := consumeOnce(t, store, broker.Message{Body: body}, raw, body)
			sum := sha256.Sum256(body)
			if o.Action != broker.Acked || runs != 1 || o.Tenant != "aws" || o.Kind != "pdf" || o.Ticket.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("outcome %s (%v), tenant %q, handler ran %d times", o.Action, o.Err, o.Tenant, runs)
			}
		})
	}
	t.Run("ViaSNS", func(t *testing.T) {
		body := `{"order":42}`
		env := broker.SNSWrap(t, body, nil)
		o, runs := consumeOnce(t, store, broker.Message{Body: env}, raw, []byte(body))
		if o.Action != broker.Acked || runs != 1 {
			t.Fatalf("outcome %s (%v), handler ran %d times", o.Action, o.Err, runs)
		}
	})
	for name, body := range map[string]string{
		"MalformedTicket":  `{"v":1,"tenant":"aws","size":-1}`,
		"PointerNoMarker":  `["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"` + pointerBucket + `","s3Key":"k"}]`,
		"MalformedNpm":     `{"S3Payload":{"Bucket":"` + pointerBucket + `"}}`,
		"SNSInsideSNS":     string(broker.SNSWrap(t, `{"x":1}`, nil)),
		"ForeignPointerNo": `["com.amazon.sqs.javamessaging.MessageS3Pointer"]`,
	} {
		t.Run(name, func(t *testing.T) {
			m := broker.Message{Body: []byte(body)}
			if name == "SNSInsideSNS" {
				m.Body = broker.SNSWrap(t, body, nil)
			}
			o, runs := consumeOnce(t, store, m, raw, nil)
			if o.Action != broker.DeadLettered || o.Attempt != 1 || o.Reason != "ticket-invalid" || runs != 0 {
				t.Fatalf("outcome %s on attempt %d, reason %q; handler ran %d times; err %v", o.Action, o.Attempt, o.Reason, runs, o.Err)
			}
		})
	}
	tr := brokertest.NewFake(256 << 10)
	h := map[string]claimcheck.Handler{"pdf": claimcheck.HandlerFunc(func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) { return nil, nil })}
	for _, bad := range []broker.ConsumeOptions{{RawTenant: "aws"}, {RawTenant: "Not A Tenant", DefaultKind: "pdf"}} {
		bad.Handlers = h
		if err := broker.Consume(ctx, tr, store, bad); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}
