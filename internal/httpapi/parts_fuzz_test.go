package httpapi

import (
	"bytes"
	"io"
	"mime/multipart"
	"strings"
	"testing"
)

// FuzzPartReader: whatever the body, reading the attachments in order
// either fails or yields exactly the body's form-data parts, named as the
// query named them, in its order, and nothing after them; it never panics.
func FuzzPartReader(f *testing.F) {
	const boundary = "B"
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nxyz\r\n--B--\r\n"), "a", false)
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Type: text/plain\r\n\r\nx\r\n--B\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\n\r\n--B--\r\n"), "a,b", true)
	f.Add([]byte("--B\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\nx\r\n--B--\r\n"), "a", false)
	f.Add([]byte("--B--\r\n"), "a", false)
	f.Add([]byte(""), "a,b", false)
	f.Fuzz(func(t *testing.T, body []byte, names string, allowEmpty bool) {
		list := strings.Split(names, ",")
		pr, err := newPartReader("multipart/form-data; boundary="+boundary, bytes.NewReader(body), list, allowEmpty)
		if err != nil {
			return
		}
		got := make([][]byte, len(pr.atts))
		for i, a := range pr.atts {
			if got[i], err = io.ReadAll(a.Body); err != nil {
				return
			}
			if !allowEmpty && len(got[i]) == 0 {
				t.Fatalf("attachment %q read empty without allowEmpty", a.Name)
			}
		}
		// Accepted: the body is exactly these parts.
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for i, name := range list {
			p, err := mr.NextPart()
			if err != nil {
				t.Fatalf("accepted, but part %d does not parse: %v", i+1, err)
			}
			b, err := io.ReadAll(p)
			if err != nil || p.FormName() != name || !bytes.Equal(b, got[i]) || pr.atts[i].ContentType != p.Header.Get("Content-Type") {
				t.Fatalf("accepted, but part %d is %q (%d bytes, %v), read as %q (%d bytes)", i+1, p.FormName(), len(b), err, name, len(got[i]))
			}
		}
		if _, err := mr.NextPart(); err != io.EOF {
			t.Fatalf("accepted, but the body has more parts: %v", err)
		}
	})
}
