package gcsstore_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/claimcheck/claimcheck/internal/testenv"
	_ "github.com/claimcheck/claimcheck/stores/gcsstore"
	"github.com/claimcheck/claimcheck/storetest"
)

// URLEnv names the environment variable holding the gs:// URL of a test
// bucket on fake-gcs-server; scripts/fake-gcs.sh env prints it with
// STORAGE_EMULATOR_HOST.
const URLEnv = "CLAIMCHECK_TEST_GCS_URL"

const how = `scripts/fake-gcs.sh build && scripts/fake-gcs.sh start && eval "$(scripts/fake-gcs.sh env)"`

func TestConformance(t *testing.T) {
	url := testenv.Require(t, URLEnv, how)
	host := testenv.Require(t, "STORAGE_EMULATOR_HOST", how)
	// The client retries a refused upload until its context ends (the
	// test's timeout, minutes away): say at once that nothing answers.
	host = strings.TrimPrefix(strings.TrimPrefix(host, "http://"), "https://")
	if c, err := net.DialTimeout("tcp", host, 5*time.Second); err != nil {
		testenv.Unavailable(t, "STORAGE_EMULATOR_HOST="+host+": "+err.Error()+": "+how)
	} else {
		c.Close()
	}
	t.Parallel()
	storetest.Run(t, storetest.Harness{Open: storetest.URLOpener(func(*testing.T) string { return url })})
}
