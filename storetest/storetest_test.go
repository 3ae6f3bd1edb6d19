package storetest_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/storetest"
)

// S3URLEnv names the environment variable holding the s3:// URL of a real
// S3-compatible test bucket (scripts/seaweedfs.sh env prints it, with the
// credentials it needs).
const S3URLEnv = "CLAIMCHECK_TEST_S3_URL"

// opener opens stores at url with OpenStore, each with its own spool
// directory, closed when the test ends.
func opener(url func(t *testing.T) string) func(t *testing.T, opts *claimcheck.Options) *claimcheck.Store {
	return func(t *testing.T, opts *claimcheck.Options) *claimcheck.Store {
		t.Helper()
		var o claimcheck.Options
		if opts != nil {
			o = *opts
		}
		o.SpoolDir = t.TempDir()
		s, err := claimcheck.OpenStore(t.Context(), url(t), &o)
		if err != nil {
			t.Fatalf("OpenStore: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	}
}

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{Open: opener(func(t *testing.T) string {
		return "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "bucket"))
	})})
}

// TestConformanceMem goes through RunConformance, the entry point that
// derives the stores it needs from one opened store.
func TestConformanceMem(t *testing.T) {
	t.Parallel()
	open := opener(func(*testing.T) string { return "mem://" })
	storetest.RunConformance(t, func(t *testing.T) *claimcheck.Store { return open(t, nil) })
}

func TestConformanceS3(t *testing.T) {
	url := os.Getenv(S3URLEnv)
	if url == "" {
		t.Skip(S3URLEnv + " is not set, so there is no S3 server to test against: " +
			`scripts/seaweedfs.sh build && scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"`)
	}
	t.Parallel()
	storetest.Run(t, storetest.Harness{Open: opener(func(*testing.T) string { return url })})
}
