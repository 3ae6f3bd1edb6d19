package gcsstore_test

import (
	"testing"

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
	testenv.Require(t, "STORAGE_EMULATOR_HOST", how)
	t.Parallel()
	storetest.Run(t, storetest.Harness{Open: storetest.URLOpener(func(*testing.T) string { return url })})
}
