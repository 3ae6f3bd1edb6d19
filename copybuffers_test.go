package claimcheck_test

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"
)

// TestCopyBuffersNotShared: check-ins from a stream and verified claims
// reuse their 1 MiB copy buffers (copy.go, fileBufs). Many at once, of
// distinct payloads of several pieces each, on the file and mem stores,
// plain and encrypted: a buffer given back while its last piece is still
// being written (or decrypted) would end up in another payload's object or
// reader, and its claim would fail verification or read other bytes.
func TestCopyBuffersNotShared(t *testing.T) {
	const workers, each = 6, 3
	for _, tc := range []localStore{storeFile, storeFileEncrypted, storeMem, storeMemEncrypted} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.bundle(t)
			var wg sync.WaitGroup
			errs := make(chan error, workers*each)
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						seed := uint64(w*each + i + 1)
						want := randomBytes(5<<19+int(seed)*4099, seed) // 2.5 MiB and more: three pieces
						if err := roundTrip(b, want); err != nil {
							errs <- fmt.Errorf("payload %d: %w", seed, err)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// roundTrip checks want in from a plain stream (no size known: spooled),
// claims it and compares both verified readers' bytes with want.
func roundTrip(b *testBundle, want []byte) error {
	tk, err := b.store.CheckIn(b.ctx, "tenant-a", struct{ io.Reader }{bytes.NewReader(want)}, nil)
	if err != nil {
		return fmt.Errorf("CheckIn: %w", err)
	}
	p, err := b.store.Claim(tk)
	if err != nil {
		return fmt.Errorf("Claim: %w", err)
	}
	defer p.Close()
	r, err := p.Open(b.ctx)
	if err != nil {
		return fmt.Errorf("Open: %w", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return fmt.Errorf("read Open: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("Open read %d bytes that differ from the %d checked in", len(got), len(want))
	}
	s, err := p.OpenStream(b.ctx)
	if err != nil {
		return fmt.Errorf("OpenStream: %w", err)
	}
	got, err = io.ReadAll(s)
	s.Close()
	if err != nil {
		return fmt.Errorf("read OpenStream: %w", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("OpenStream read %d bytes that differ from the %d checked in", len(got), len(want))
	}
	return nil
}
