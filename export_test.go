package claimcheck

// SetSyncHook is the test seam of file:// commits (filestore.go): fn is
// told each step, with the path it was taken on ("fsync file" on the
// object's unnamed file, by its /proc/self/fd path, "fsync attrs", "link"
// to the object's path, "fsync dir" for each directory up to the store's
// root). Set it before the
// store is used.
func SetSyncHook(s *Store, fn func(op, path string)) { s.syncHook = fn }
