package s3store

import (
	"net/url"
	"testing"

	"github.com/claimcheck/claimcheck"
)

func TestS3UploadFromURL(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("s3://b?region=us-east-1&part_size=8MiB&upload_concurrency=3&use_path_style=true")
	up, err := s3UploadFromURL(u)
	if err != nil || up.partSize != 8<<20 || up.concurrency != 3 {
		t.Fatalf("s3UploadFromURL: %+v, %v", up, err)
	}
	if q := u.Query(); q.Has("part_size") || q.Has("upload_concurrency") || q.Get("use_path_style") != "true" {
		t.Errorf("claimcheck's parameters not taken out, or s3blob's lost: %s", u.RawQuery)
	}
	h := &hooks{up: up}
	if got := h.partSize(1 << 30); got != 8<<20 {
		t.Errorf("part size for 1 GiB with part_size=8MiB: %d", got)
	}
	if got := h.partSize(100 << 30); got <= 8<<20 {
		t.Errorf("part size for 100 GiB: %d, want more than 8 MiB (10,000-part limit)", got)
	}
	if got := (&hooks{}).concurrency(); got != 2 {
		t.Errorf("default concurrency %d", got)
	}
	for _, bad := range []string{"part_size=1MiB", "part_size=6GiB", "part_size=x", "upload_concurrency=0", "upload_concurrency=17", "upload_concurrency=two"} {
		u, _ := url.Parse("s3://b?region=us-east-1&" + bad)
		if _, err := s3UploadFromURL(u); err == nil {
			t.Errorf("%s accepted", bad)
		}
		if _, err := claimcheck.OpenStore(t.Context(), u.String(), nil); err == nil {
			t.Errorf("claimcheck.OpenStore with %s succeeded", bad)
		}
	}
	f, _ := url.Parse("file:///tmp/x?part_size=1")
	if up, err := s3UploadFromURL(f); err != nil || up != (s3Upload{}) {
		t.Errorf("file URL: %+v %v", up, err)
	}
}
