package cli

// Reading a payload to submit: a file or standard input.

import (
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"

	"github.com/claimcheck/claimcheck/pipeline"
)

// errEmptyPayload refuses a 0-byte payload unless --allow-empty (see
// pipeline.ErrEmptyPayload, which it wraps).
var errEmptyPayload = fmt.Errorf("%w; pass --allow-empty if that is intended", pipeline.ErrEmptyPayload)

// refuseEmpty returns r, the payload read from what, of size bytes as
// openInput gives it (-1: standard input, size unknown), such that an
// empty payload fails with pipeline.ErrEmptyPayload before anything is
// stored. A file is returned as it is once its size is known not to be
// 0: the check-in then reads the file itself twice rather than spool it
// (claimcheck.Store.CheckIn), which a wrapper would hide. A stream is
// wrapped in pipeline.NonEmpty.
func refuseEmpty(r io.Reader, what string, size int64) (io.Reader, error) {
	switch {
	case size == 0:
		return nil, fmt.Errorf("%s: %w", what, errEmptyPayload)
	case size > 0:
		return r, nil
	}
	return pipeline.NonEmpty(r, what), nil
}

// openInput opens FILE or "-" (stdin) and returns it, its media type (from
// the extension; "" for stdin), its size in bytes (-1 for stdin) and a
// close function. A missing or unreadable file, or a directory, is an error
// before anything is stored.
func openInput(stdin io.Reader, path string) (io.Reader, string, int64, func(), error) {
	if path == "-" {
		return stdin, "", -1, func() {}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, "", 0, nil, usagef("cannot read %s: %v", path, unwrapPath(err))
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, "", 0, nil, usagef("cannot read %s: not a regular file (to read a pipe or device, give - and redirect it to standard input)", path)
	}
	ct := mime.TypeByExtension(filepath.Ext(path))
	if ct == "" {
		ct = "application/octet-stream"
	}
	return f, ct, st.Size(), func() { f.Close() }, nil
}
