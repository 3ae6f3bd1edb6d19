//go:build !linux

package claimcheck

import (
	"errors"
	"os"
)

// Files without a name are Linux's (O_TMPFILE): elsewhere file:// check-ins
// go through fileblob's writer (anonSupported is false).

func createAnon(dir string) (*os.File, error) { return nil, errors.ErrUnsupported }

func linkAnon(f *os.File, path string) error { return errors.ErrUnsupported }

func anonSupported(dir string) bool { return false }

func startWriteback(f *os.File, off, n int64) {}
