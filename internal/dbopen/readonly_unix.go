//go:build unix

package dbopen

import (
	"os"

	"golang.org/x/sys/unix"
)

// dirReadOnly reports whether dir is read-only: this process cannot write
// it (a read-only mount, permissions), or it has no write permission bit
// at all (a chmod a-w copy, which root could still write).
func dirReadOnly(dir string) bool {
	st, err := os.Stat(dir)
	if err != nil {
		return false
	}
	return st.Mode().Perm()&0o222 == 0 || unix.Access(dir, unix.W_OK) != nil
}
