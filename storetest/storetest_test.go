package storetest_test

import (
	"path/filepath"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/testenv"
	_ "github.com/claimcheck/claimcheck/stores/s3store" // s3:// URLs
	"github.com/claimcheck/claimcheck/storetest"
)

// S3URLEnv names the environment variable holding the s3:// URL of a real
// S3-compatible test bucket (scripts/seaweedfs.sh env prints it, with the
// credentials it needs).
const S3URLEnv = "CLAIMCHECK_TEST_S3_URL"

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{Open: storetest.URLOpener(func(t *testing.T) string {
		return "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "bucket"))
	})})
}

// TestConformanceMem goes through RunConformance, the entry point that
// derives the stores it needs from one opened store.
func TestConformanceMem(t *testing.T) {
	t.Parallel()
	open := storetest.URLOpener(func(*testing.T) string { return "mem://" })
	storetest.RunConformance(t, func(t *testing.T) *claimcheck.Store { return open(t, nil) })
}

func TestConformanceS3(t *testing.T) {
	url := testenv.Require(t, S3URLEnv, `scripts/seaweedfs.sh build && scripts/seaweedfs.sh start && eval "$(scripts/seaweedfs.sh env)"`)
	t.Parallel()
	storetest.Run(t, storetest.Harness{Open: storetest.URLOpener(func(*testing.T) string { return url })})
}
