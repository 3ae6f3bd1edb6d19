package testenv

import (
	"strings"
	"sync"
)

// Buffer collects what a command or server writes (its standard error, a
// log) while the test reads it: a strings.Builder safe for a writer and
// a reader at once.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
