package temporal_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
	"github.com/claimcheck/claimcheck/stores/s3store/s3test"

	cctemporal "github.com/claimcheck/claimcheck/contrib/temporal"
)

const day = 24 * time.Hour

func TestRetention(t *testing.T) {
	r, err := cctemporal.Retention(cctemporal.RetentionInputs{
		WorkflowExecution:  3*day + 2*time.Hour,
		NamespaceRetention: 30 * day,
		Margin:             7 * day,
	})
	if err != nil {
		t.Fatal(err)
	}
	// 3d2h + 30d + 7d = 40d2h: 41 days, rounded up.
	if r.PayloadDays != 41 || r.TruncatedDays != 40 {
		t.Errorf("PayloadDays %d, TruncatedDays %d; want 41, 40", r.PayloadDays, r.TruncatedDays)
	}
	var names []string
	for _, s := range r.PayloadSteps {
		if s.Add > 0 {
			names = append(names, s.Name)
		}
	}
	if got := strings.Join(names, ", "); got != "workflow execution timeout, namespace retention, replay margin" {
		t.Errorf("steps %q", got)
	}
	for _, in := range []cctemporal.RetentionInputs{
		{NamespaceRetention: day}, // no execution timeout: Temporal's unlimited
		{WorkflowExecution: day},  // no namespace retention
		{WorkflowExecution: -1, NamespaceRetention: day},
	} {
		if _, err := cctemporal.Retention(in); !errors.Is(err, claimcheck.ErrConfig) {
			t.Errorf("Retention(%+v) = %v, want ErrConfig", in, err)
		}
	}
}

// TestCheckRetentionS3: on a bucket whose lifecycle expires payloads/ after
// 7 days, a deployment that needs 41 is refused naming the rule; once the
// rules FromRetention computes are applied, the check passes.
func TestCheckRetentionS3(t *testing.T) {
	b := s3test.New(t, "temporal-retention")
	store, err := claimcheck.OpenStore(t.Context(), b.URL, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d := newDriver(t, store)
	r, err := cctemporal.Retention(cctemporal.RetentionInputs{WorkflowExecution: 3*day + 2*time.Hour, NamespaceRetention: 30 * day, Margin: 7 * day})
	if err != nil {
		t.Fatal(err)
	}
	short, err := cctemporal.Retention(cctemporal.RetentionInputs{WorkflowExecution: day, NamespaceRetention: 5 * day})
	if err != nil {
		t.Fatal(err)
	}
	m, err := lifecycle.ManagerOf(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lifecycle.Apply(t.Context(), m, lifecycle.FromRetention(short).InNamespace(store.Namespace()), nil); err != nil {
		t.Fatalf("apply a 6-day policy: %v", err)
	}
	err = d.CheckRetention(t.Context(), r)
	if !errors.Is(err, claimcheck.ErrConfig) || !strings.Contains(err.Error(), "41 days") {
		t.Fatalf("CheckRetention against 6-day rules = %v, want ErrConfig naming 41 days", err)
	}
	t.Logf("refused: %v", err)
	if _, err := lifecycle.Apply(t.Context(), m, lifecycle.FromRetention(r).InNamespace(store.Namespace()), nil); err != nil {
		t.Fatalf("apply the driver's policy: %v", err)
	}
	// StartupExpiry reads a bucket's rules once per process: a new store
	// (another S3 client) reads them again.
	store2, err := claimcheck.OpenStore(t.Context(), b.URL, &claimcheck.Options{SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	if err := newDriver(t, store2).CheckRetention(t.Context(), r); err != nil {
		t.Fatalf("CheckRetention after applying the driver's policy: %v", err)
	}
}

// A file store has no lifecycle claimcheck reads: the check passes.
func TestCheckRetentionFileStore(t *testing.T) {
	d := newDriver(t, openFileStore(t, nil))
	r, err := cctemporal.Retention(cctemporal.RetentionInputs{WorkflowExecution: day, NamespaceRetention: day})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckRetention(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckRetention(t.Context(), nil); !errors.Is(err, claimcheck.ErrConfig) {
		t.Fatalf("CheckRetention(nil) = %v, want ErrConfig", err)
	}
}
