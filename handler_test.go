package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/claimcheck/claimcheck"
)

func TestWorkVerifiesBeforeHandler(t *testing.T) {
	t.Parallel()

	t.Run("Missing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, tk := claimed(t, b, 100_000)
		if err := b.store.Bucket().Delete(b.ctx, tk.Key); err != nil {
			t.Fatal(err)
		}
		var ran atomic.Bool
		h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			ran.Store(true)
			return nil, nil
		})
		rt, err := b.store.Work(b.ctx, &claimcheck.Job{ID: "1", Kind: "pdf", Tenant: "acme", Attempt: 1}, tk, h)
		if rt != nil {
			t.Fatalf("Work returned a result ticket: %v", rt)
		}
		assertIs(t, err, claimcheck.ErrPayloadMissing)
		if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonPayloadMissing {
			t.Fatalf("IsPermanent=%v Reason=%q", claimcheck.IsPermanent(err), claimcheck.Reason(err))
		}
		if ran.Load() {
			t.Fatal("handler ran on a missing payload")
		}
		assertRedacted(t, err, tk)
	})

	t.Run("Corrupt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, tk := claimed(t, b, 100_000)
		corruptFile(t, b, tk, func(d []byte) []byte { d[12345] ^= 4; return d })
		var ran atomic.Bool
		h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			ran.Store(true)
			return nil, nil
		})
		_, err := b.store.Work(b.ctx, &claimcheck.Job{Kind: "pdf", Tenant: "acme"}, tk, h)
		assertIs(t, err, claimcheck.ErrPayloadCorrupt)
		if ran.Load() {
			t.Fatal("handler ran on a corrupt payload")
		}
		assertRedacted(t, err, tk)
	})

	t.Run("InvalidTicket", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, tk := claimed(t, b, 100_000)
		bad := *tk
		bad.Store = "elsewhere"
		var ran atomic.Bool
		h := claimcheck.Lazy(claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			ran.Store(true)
			return nil, nil
		}))
		_, err := b.store.Work(b.ctx, &claimcheck.Job{Kind: "pdf", Tenant: "acme"}, &bad, h)
		assertIs(t, err, claimcheck.ErrTicketInvalid)
		if ran.Load() {
			t.Fatal("lazy handler ran on a foreign ticket")
		}
	})
}

func TestWorkLazy(t *testing.T) {
	t.Parallel()

	t.Run("NeverOpens", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, tk := claimed(t, b, 100_000)
		// The object is gone: only a handler that downloads it could notice.
		if err := b.store.Bucket().Delete(b.ctx, tk.Key); err != nil {
			t.Fatal(err)
		}
		var seen *claimcheck.Job
		h := claimcheck.Lazy(claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			seen = job
			if job.Payload == nil || job.Payload.Size() != tk.Size || job.Payload.Ticket().Key != tk.Key {
				t.Errorf("job payload = %+v", job.Payload)
			}
			return nil, nil
		}))
		job := &claimcheck.Job{ID: "7", Kind: "route", Tenant: "acme", Attempt: 1}
		rt, err := b.store.Work(b.ctx, job, tk, h)
		if err != nil || rt != nil {
			t.Fatalf("Work(lazy, never opens) = %v, %v; want nil, nil", rt, err)
		}
		if seen != job {
			t.Fatal("handler did not run with the job")
		}
		b.assertSpoolEmpty(t)
	})

	t.Run("OpensMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		_, tk := claimed(t, b, 100_000)
		if err := b.store.Bucket().Delete(b.ctx, tk.Key); err != nil {
			t.Fatal(err)
		}
		h := claimcheck.Lazy(claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			_, err := job.Payload.Open(ctx)
			return nil, err
		}))
		_, err := b.store.Work(b.ctx, &claimcheck.Job{Kind: "route", Tenant: "acme"}, tk, h)
		assertIs(t, err, claimcheck.ErrPayloadMissing)
		if !claimcheck.IsPermanent(err) {
			t.Fatal("missing payload opened by a lazy handler is not permanent")
		}
	})

	t.Run("OpensVerified", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		data, tk := claimed(t, b, 100_000)
		h := claimcheck.Lazy(claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			r, err := job.Payload.Open(ctx)
			if err != nil {
				return nil, err
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("lazy Open: %d bytes, %v", len(got), err)
			}
			return nil, nil
		}))
		if _, err := b.store.Work(b.ctx, &claimcheck.Job{Kind: "route", Tenant: "acme"}, tk, h); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWorkResult(t *testing.T) {
	t.Parallel()
	b := setup(t, &claimcheck.Options{AlwaysOffload: true})
	data := []byte(strings.Repeat("claim check ", 10_000))
	tk := b.checkIn(t, "acme", data, &claimcheck.CheckInOptions{ContentType: "text/plain"})

	h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		r, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		in, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		return &claimcheck.Result{Body: bytes.NewReader(bytes.ToUpper(in)), ContentType: "text/plain; charset=utf-8"}, nil
	})
	rt, err := b.store.Work(b.ctx, &claimcheck.Job{ID: "9", Kind: "upper", Tenant: "acme", Attempt: 1}, tk, h)
	if err != nil {
		t.Fatalf("Work: %v", err)
	}
	want := bytes.ToUpper(data)
	if rt == nil || rt.IsInline() {
		t.Fatalf("result ticket = %v", rt)
	}
	if !strings.HasPrefix(rt.Key, "results/acme/") || rt.Key != "results/acme/"+rt.SHA256[:2]+"/"+rt.SHA256 {
		t.Fatalf("result key = %q, want results/acme/<xx>/<sha256>", rt.Key)
	}
	if rt.Tenant != "acme" || rt.Size != int64(len(want)) || rt.SHA256 != sha256Hex(want) || rt.ContentType != "text/plain; charset=utf-8" || rt.Store != "default" {
		t.Fatalf("result ticket = %v type %q store %q", rt, rt.ContentType, rt.Store)
	}
	if got := b.claimBytes(t, rt); !bytes.Equal(got, want) {
		t.Fatal("result bytes differ")
	}
	b.assertObjects(t, tk.Key, rt.Key)

	// A handler with no result stores nothing.
	nothing := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		return &claimcheck.Result{}, nil
	})
	if rt, err := b.store.Work(b.ctx, &claimcheck.Job{Kind: "noop", Tenant: "acme"}, tk, nothing); rt != nil || err != nil {
		t.Fatalf("Work(empty result) = %v, %v", rt, err)
	}
	b.assertObjects(t, tk.Key, rt.Key)
}

func TestWorkHandlerErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, tk := claimed(t, b, 100_000)
	errBadPDF := errors.New("not a PDF")

	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
		reason    string
	}{
		{"Transient", errBadPDF, false, claimcheck.ReasonTransient},
		{"Permanent", claimcheck.Permanent(errBadPDF), true, claimcheck.ReasonHandler},
		{"ClassedPermanent", claimcheck.Permanent(claimcheck.ErrPayloadTooLarge), true, claimcheck.ReasonPayloadTooLarge},
	} {
		h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
			return &claimcheck.Result{Body: strings.NewReader("ignored")}, tc.err
		})
		rt, err := b.store.Work(b.ctx, &claimcheck.Job{Kind: "parse", Tenant: "acme"}, tk, h)
		if rt != nil {
			t.Fatalf("%s: result ticket on error: %v", tc.name, rt)
		}
		if !errors.Is(err, tc.err) {
			t.Fatalf("%s: error %v does not wrap the handler's", tc.name, err)
		}
		if claimcheck.IsPermanent(err) != tc.permanent || claimcheck.Reason(err) != tc.reason {
			t.Errorf("%s: IsPermanent=%v Reason=%q, want %v %q", tc.name, claimcheck.IsPermanent(err), claimcheck.Reason(err), tc.permanent, tc.reason)
		}
		if !strings.Contains(err.Error(), "handler parse") {
			t.Errorf("%s: error %q does not name the kind", tc.name, err)
		}
		assertRedacted(t, err, tk)
	}
	b.assertObjects(t, tk.Key)

	// A result that cannot be checked in fails the job, keeping its class.
	big := setup(t, &claimcheck.Options{MaxPayloadSize: 200_000})
	_, tk2 := claimed(t, big, 100_000)
	h := claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		return &claimcheck.Result{Body: bytes.NewReader(randomBytes(300_000, 1))}, nil
	})
	_, err := big.store.Work(big.ctx, &claimcheck.Job{Kind: "grow", Tenant: "acme"}, tk2, h)
	assertIs(t, err, claimcheck.ErrPayloadTooLarge)
	big.assertObjects(t, tk2.Key)
}
