//go:build linux

package cli

import "golang.org/x/sys/unix"

// diskFree is the bytes an unprivileged process may still write to the
// file system holding dir (statfs(2): f_bavail × f_bsize); ok is false
// when it cannot be told.
func diskFree(dir string) (free uint64, ok bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Bsize <= 0 {
		return 0, false
	}
	return st.Bavail * uint64(st.Bsize), true
}
