// Package ctxio bounds streams in time: readers that stop when their
// context ends, and connections that fail when they make no progress.
package ctxio

import (
	"context"
	"io"
)

// Reader returns a reader that fails with ctx's error, before reading
// further, once ctx is done: a copy of a long stream stops on cancellation
// instead of running to its end.
func Reader(ctx context.Context, r io.Reader) io.Reader { return reader{ctx, r} }

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
