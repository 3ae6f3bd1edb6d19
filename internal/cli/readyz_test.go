package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck"
)

// TestReadyzFileStoreGone: work --http's /readyz on the data directory's
// file store answers 503 naming the store while its namespace marker is
// gone (moved away), and while its root directory is gone, and 200 again
// each time it is put back; /healthz answers 200 throughout.
func TestReadyzFileStoreGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base, stderr := b.startWork(context.Background(), "work", "--kind", "pdf-info")
	root := filepath.Join(b.data, "objects")
	marker := filepath.Join(root, claimcheck.NamespaceMarkerKey)
	body := waitStatus(t, base+"/readyz", http.StatusOK)
	if !strings.Contains(body, "ok store") {
		t.Fatalf("/readyz 200 without the store: %q", body)
	}
	for _, c := range []struct {
		name, from, to, says string
	}{
		{"namespace marker", marker, marker + ".moved", "the namespace marker " + claimcheck.NamespaceMarkerKey + " is gone"},
		{"root directory", root, root + ".moved", "its root directory is gone"},
	} {
		if err := os.Rename(c.from, c.to); err != nil {
			t.Fatal(err)
		}
		body = waitStatus(t, base+"/readyz", http.StatusServiceUnavailable)
		if !strings.Contains(body, "FAIL store") || !strings.Contains(body, "file://"+filepath.ToSlash(root)) || !strings.Contains(body, c.says) || !strings.Contains(body, "ok database") {
			t.Errorf("%s gone: /readyz 503 does not name the store and why: %q", c.name, body)
		}
		t.Logf("/readyz with the %s gone: 503\n%s", c.name, body)
		if code, _ := httpGet(t, base+"/healthz"); code != http.StatusOK {
			t.Errorf("/healthz with the %s gone: %d, want 200", c.name, code)
		}
		if err := os.Rename(c.to, c.from); err != nil {
			t.Fatal(err)
		}
		body = waitStatus(t, base+"/readyz", http.StatusOK)
		t.Logf("/readyz with the %s back: 200\n%s", c.name, body)
	}
	if t.Failed() {
		t.Logf("work's stderr:\n%s", stderr.String())
	}
}
