package claimcheck_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/driver"
	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
)

func TestErrorClasses(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		err       error
		permanent bool
		reason    string
	}{
		{claimcheck.ErrPayloadMissing, true, "payload-missing"},
		{claimcheck.ErrPayloadCorrupt, true, "payload-corrupt"},
		{claimcheck.ErrTicketInvalid, true, "ticket-invalid"},
		{claimcheck.ErrPayloadTooLarge, true, "payload-too-large"},
		{claimcheck.ErrKeyConflict, true, "key-conflict"},
		{claimcheck.ErrAccessDenied, false, "access-denied"},
		{claimcheck.ErrUnavailable, false, "store-unavailable"},
		{claimcheck.ErrConfig, false, "config"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			for _, err := range []error{
				tc.err,
				fmt.Errorf("claimcheck: claim tenant=acme: %w", tc.err),
				fmt.Errorf("outer: %w", fmt.Errorf("middle: %w", tc.err)),
				fmt.Errorf("handler: %w", errors.Join(errors.New("context"), tc.err)),
			} {
				if got := claimcheck.IsPermanent(err); got != tc.permanent {
					t.Errorf("IsPermanent(%q) = %v, want %v", err, got, tc.permanent)
				}
				if got := claimcheck.Reason(err); got != tc.reason {
					t.Errorf("Reason(%q) = %q, want %q", err, got, tc.reason)
				}
				if !errors.Is(err, tc.err) {
					t.Errorf("errors.Is(%q, class) = false", err)
				}
			}
			// Permanent makes any class permanent; the reason stays the class's.
			p := claimcheck.Permanent(fmt.Errorf("wrapped: %w", tc.err))
			if !claimcheck.IsPermanent(p) || claimcheck.Reason(p) != tc.reason || !errors.Is(p, tc.err) {
				t.Errorf("Permanent(%v): IsPermanent=%v Reason=%q", tc.err, claimcheck.IsPermanent(p), claimcheck.Reason(p))
			}
		})
	}

	// The classes are distinct.
	all := []error{
		claimcheck.ErrPayloadMissing, claimcheck.ErrPayloadCorrupt, claimcheck.ErrTicketInvalid,
		claimcheck.ErrPayloadTooLarge, claimcheck.ErrKeyConflict, claimcheck.ErrAccessDenied,
		claimcheck.ErrUnavailable, claimcheck.ErrConfig,
	}
	for i, a := range all {
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = true", a, b)
			}
		}
	}
}

func TestPermanent(t *testing.T) {
	t.Parallel()

	if claimcheck.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
	if claimcheck.IsPermanent(nil) || claimcheck.Reason(nil) != "" {
		t.Fatalf("nil: IsPermanent=%v Reason=%q", claimcheck.IsPermanent(nil), claimcheck.Reason(nil))
	}

	errBad := errors.New("page 3 is not a page")
	p := claimcheck.Permanent(errBad)
	if p.Error() != "page 3 is not a page" {
		t.Fatalf("Error() = %q", p.Error())
	}
	for _, err := range []error{p, fmt.Errorf("job 7: %w", p), fmt.Errorf("a: %w", fmt.Errorf("b: %w", p))} {
		if !claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonHandler {
			t.Errorf("%q: IsPermanent=%v Reason=%q", err, claimcheck.IsPermanent(err), claimcheck.Reason(err))
		}
		if !errors.Is(err, errBad) {
			t.Errorf("%q does not wrap the handler's error", err)
		}
		var pe *claimcheck.PermanentError
		if !errors.As(err, &pe) || pe.Err != errBad {
			t.Errorf("errors.As(%q, *PermanentError) failed", err)
		}
	}

	// Errors of no class are transient.
	for _, err := range []error{errBad, context.Canceled, context.DeadlineExceeded, io.ErrUnexpectedEOF, fmt.Errorf("x: %w", errBad)} {
		if claimcheck.IsPermanent(err) || claimcheck.Reason(err) != claimcheck.ReasonTransient {
			t.Errorf("%q: IsPermanent=%v Reason=%q, want transient", err, claimcheck.IsPermanent(err), claimcheck.Reason(err))
		}
	}

	// Access denied is never "missing", and never permanent on its own.
	denied := fmt.Errorf("s3 GetObject: %w", claimcheck.ErrAccessDenied)
	if claimcheck.IsPermanent(denied) || errors.Is(denied, claimcheck.ErrPayloadMissing) || claimcheck.Reason(denied) != claimcheck.ReasonAccessDenied {
		t.Fatalf("access denied: IsPermanent=%v Reason=%q", claimcheck.IsPermanent(denied), claimcheck.Reason(denied))
	}
}

// refusingDriver is a bucket driver whose every call fails with one
// gcerrors code, as a real store does when credentials are wrong (S3's
// AccessDenied) or the network is down. Its error text names the key, as
// real drivers' do.
type refusingDriver struct {
	driver.Bucket // calls not implemented below panic
	code          gcerrors.ErrorCode
	calls         atomic.Int64
}

func (d *refusingDriver) fail(key string) error {
	d.calls.Add(1)
	return fmt.Errorf("fake store: %v for %q", d.code, key)
}

func (d *refusingDriver) ErrorCode(error) gcerrors.ErrorCode { return d.code }
func (d *refusingDriver) ErrorAs(error, any) bool            { return false }
func (d *refusingDriver) As(any) bool                        { return false }
func (d *refusingDriver) Close() error                       { return nil }
func (d *refusingDriver) Attributes(_ context.Context, key string) (*driver.Attributes, error) {
	return nil, d.fail(key)
}

func (d *refusingDriver) NewRangeReader(_ context.Context, key string, _, _ int64, _ *driver.ReaderOptions) (driver.Reader, error) {
	return nil, d.fail(key)
}

func (d *refusingDriver) NewTypedWriter(_ context.Context, key, _ string, _ *driver.WriterOptions) (driver.Writer, error) {
	return nil, d.fail(key)
}

func refusingStore(t *testing.T, code gcerrors.ErrorCode) (*claimcheck.Store, *refusingDriver) {
	t.Helper()
	d := &refusingDriver{code: code}
	s, err := claimcheck.NewStore(blob.NewBucket(d), &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

// TestStoreFailuresClassified checks docs/invariants.md, invariant 4 end to end: what
// the store reports decides the class, and only NotFound at claim time is
// "missing".
func TestStoreFailuresClassified(t *testing.T) {
	t.Parallel()

	tk := offloadedTicket()
	for _, tc := range []struct {
		code                gcerrors.ErrorCode
		claimClass, checkIn error
		claimPerm           bool
	}{
		{gcerrors.PermissionDenied, claimcheck.ErrAccessDenied, claimcheck.ErrAccessDenied, false},
		{gcerrors.ResourceExhausted, claimcheck.ErrUnavailable, claimcheck.ErrUnavailable, false},
		{gcerrors.DeadlineExceeded, claimcheck.ErrUnavailable, claimcheck.ErrUnavailable, false},
		{gcerrors.Internal, claimcheck.ErrUnavailable, claimcheck.ErrUnavailable, false},
		{gcerrors.Unknown, claimcheck.ErrUnavailable, claimcheck.ErrUnavailable, false},
		{gcerrors.NotFound, claimcheck.ErrPayloadMissing, claimcheck.ErrUnavailable, true},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			t.Parallel()
			s, d := refusingStore(t, tc.code)
			ctx := t.Context()

			p, err := s.Claim(tk)
			if err != nil {
				t.Fatal(err)
			}
			for what, err := range map[string]error{
				"Verify":     p.Verify(ctx),
				"Open":       func() error { _, err := p.Open(ctx); return err }(),
				"OpenStream": func() error { _, err := p.OpenStream(ctx); return err }(),
			} {
				assertIs(t, err, tc.claimClass)
				if claimcheck.IsPermanent(err) != tc.claimPerm {
					t.Errorf("%s: IsPermanent = %v, want %v (%v)", what, claimcheck.IsPermanent(err), tc.claimPerm, err)
				}
				if tc.code != gcerrors.NotFound && errors.Is(err, claimcheck.ErrPayloadMissing) {
					t.Errorf("%s: %v is treated as missing", what, err)
				}
				if gcerrors.Code(err) != tc.code {
					t.Errorf("%s: gcerrors.Code = %v, want the driver's %v", what, gcerrors.Code(err), tc.code)
				}
				assertRedacted(t, err, tk)
			}

			var ran atomic.Bool
			_, err = s.Work(ctx, &claimcheck.Job{Kind: "pdf", Tenant: "acme"}, tk, claimcheck.HandlerFunc(
				func(context.Context, *claimcheck.Job) (*claimcheck.Result, error) { ran.Store(true); return nil, nil }))
			assertIs(t, err, tc.claimClass)
			if ran.Load() {
				t.Fatal("handler ran although the store refused the payload")
			}

			_, err = s.CheckIn(ctx, "acme", bytes.NewReader(randomBytes(threshold+1, 1)), nil)
			assertIs(t, err, tc.checkIn)
			if claimcheck.IsPermanent(err) {
				t.Errorf("CheckIn: a store failure is permanent: %v", err)
			}
			if strings.Contains(err.Error(), "payloads/acme/") {
				t.Errorf("CheckIn error names the key: %v", err)
			}
			if d.calls.Load() == 0 {
				t.Fatal("the driver was never called")
			}
		})
	}
}

// TestClaimCancelledIsNotMissing: a cancelled claim is transient, never a
// permanent verdict on the payload.
func TestClaimCancelledIsNotMissing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, tk := claimed(t, b, 500_000)
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	p, err := b.store.Claim(tk)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Verify(ctx)
	if err == nil {
		t.Fatal("Verify with a cancelled context succeeded")
	}
	if claimcheck.IsPermanent(err) || errors.Is(err, claimcheck.ErrPayloadMissing) || errors.Is(err, claimcheck.ErrPayloadCorrupt) {
		t.Fatalf("cancelled Verify: %v (IsPermanent=%v)", err, claimcheck.IsPermanent(err))
	}
	assertIs(t, err, context.Canceled)
	assertIs(t, err, claimcheck.ErrUnavailable)
	if r := claimcheck.Reason(err); r != claimcheck.ReasonUnavailable {
		t.Fatalf("Reason = %q", r)
	}
	b.assertSpoolEmpty(t)
	// The payload can still be claimed afterwards.
	if err := p.Verify(b.ctx); err != nil {
		t.Fatalf("Verify after a cancelled attempt: %v", err)
	}
}
