package claimcheck

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// createAnon creates a file without a name in dir (open(2)'s O_TMPFILE):
// no listing, no sweeper and no other process sees it, and a check-in
// that dies leaves nothing behind; linkAnon names it once it is complete.
// Its mode is fileblob's (0666 less the umask). The file's Name is its
// /proc/self/fd path.
func createAnon(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return nil, &os.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), "/proc/self/fd/"+strconv.Itoa(fd)), nil
}

// linkAnon gives f, made by createAnon, the name path, in one step that
// fails with an error matching os.ErrExist if path exists (linkat(2)
// never replaces a name).
func linkAnon(f *os.File, path string) error {
	if err := unix.Linkat(unix.AT_FDCWD, f.Name(), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &os.LinkError{Op: "link", Old: "an unnamed file", New: path, Err: err}
	}
	return nil
}

// anonSupported reports whether files without a name can be made in dir
// and named later: O_TMPFILE on its file system (ext4, XFS, Btrfs, tmpfs;
// not every network or FUSE file system) and /proc to name them through.
func anonSupported(dir string) bool {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		return false
	}
	f, err := createAnon(dir)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// startWriteback asks the kernel to start writing f's bytes in [off,
// off+n) to disk (sync_file_range(2), SYNC_FILE_RANGE_WRITE), without
// waiting for them: the fsync that makes the object durable then has less
// left to wait for. Best effort: an error is the fsync's to report.
func startWriteback(f *os.File, off, n int64) {
	_ = unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
