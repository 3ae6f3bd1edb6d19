//go:build !unix

package dbopen

import "os"

// dirReadOnly reports whether dir has no write permission bit.
func dirReadOnly(dir string) bool {
	st, err := os.Stat(dir)
	return err == nil && st.Mode().Perm()&0o222 == 0
}
