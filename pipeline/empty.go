package pipeline

import (
	"errors"
	"fmt"
	"io"
)

// ErrEmptyPayload is the error of a payload read to its end without a
// byte (NonEmpty): `claimcheck submit` refuses one without --allow-empty,
// and the HTTP API without allow_empty=true (422 payload-empty), since an
// empty upload is far more often a failed download than a job.
var ErrEmptyPayload = errors.New("payload is empty (0 bytes)")

// NonEmpty returns r such that a read that reaches its end before any
// byte was read fails with ErrEmptyPayload (wrapped, after what: "what:
// payload is empty (0 bytes)") instead of io.EOF, so a check-in reading
// it stops before anything is stored or enqueued. A non-empty r reads
// unchanged.
func NonEmpty(r io.Reader, what string) io.Reader { return &nonEmpty{r: r, what: what} }

type nonEmpty struct {
	r    io.Reader
	what string
	n    int64
}

func (e *nonEmpty) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	e.n += int64(n)
	if err == io.EOF && e.n == 0 {
		return n, fmt.Errorf("%s: %w", e.what, ErrEmptyPayload)
	}
	return n, err
}
