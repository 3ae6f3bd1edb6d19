package claimcheck_test

import (
	"os/exec"
	"strings"
	"testing"
)

// seamPackages import no storage SDK, directly or not: what they need of
// a storage service beyond gocloud.dev/blob goes through its store driver
// (StoreDriver, StoreHooks, lifecycle.Manager), whose provider code lives
// in stores/s3store and stores/gcsstore.
var seamPackages = []string{
	"github.com/claimcheck/claimcheck",
	"github.com/claimcheck/claimcheck/lifecycle",
	"github.com/claimcheck/claimcheck/ops",
	"github.com/claimcheck/claimcheck/sweep",
	"github.com/claimcheck/claimcheck/pipeline",
	"github.com/claimcheck/claimcheck/internal/console",
	"github.com/claimcheck/claimcheck/internal/httpapi",
}

// sdkPrefixes start the import paths of the AWS and Google Cloud SDKs.
var sdkPrefixes = []string{"github.com/aws/", "cloud.google.com/", "google.golang.org/api/"}

// gocloudCore are the google.golang.org/api packages every program using
// gocloud.dev/blob carries: gocloud's own error and retry packages
// (gocloud.dev/internal/gcerr, gocloud.dev/internal/retry through
// github.com/googleapis/gax-go) import Google's shared API error type. They
// hold no storage client.
var gocloudCore = map[string]bool{
	"google.golang.org/api/googleapi":                         true,
	"google.golang.org/api/internal/third_party/uritemplates": true,
}

// TestStoreSeamHolds: `go list -deps` of each seam package names no
// package of a storage SDK.
func TestStoreSeamHolds(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to list the packages' dependencies: %v", err)
	}
	args := append([]string{"list", "-f", "{{.ImportPath}}:{{join .Deps \" \"}}"}, seamPackages...)
	out, err := exec.Command(goBin, args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	listed := 0
	for line := range strings.Lines(string(out)) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), ":")
		listed++
		var leaks []string
		for _, d := range strings.Fields(deps) {
			for _, p := range sdkPrefixes {
				if strings.HasPrefix(d, p) && !gocloudCore[d] {
					leaks = append(leaks, d)
				}
			}
		}
		if len(leaks) > 0 {
			t.Errorf("%s depends on %d storage SDK packages, e.g. %s: move the code that needs them into its store driver (stores/s3store, stores/gcsstore)", pkg, len(leaks), strings.Join(leaks[:min(3, len(leaks))], ", "))
		}
	}
	if listed != len(seamPackages) {
		t.Fatalf("go list reported %d packages, want %d:\n%s", listed, len(seamPackages), out)
	}
}
