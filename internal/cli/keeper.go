package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/secrets"
	_ "gocloud.dev/secrets/awskms" // awskms:// keepers
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
)

// keyFileName is the local key-encryption key of the embedded default,
// created on first use under <data>/keys with mode 0600.
const keyFileName = "kek.key"

// errKeyFileMissing is returned (wrapped) by localKey when the key file
// does not exist and creating it is not allowed.
var errKeyFileMissing = errors.New("key file missing")

// openKeeper opens the keeper that wraps payload data keys and returns the
// id of its key (claimcheck.KeeperID): the URL given, none for "none", or by
// default the local key file in the data directory, created (32 random
// bytes, URL-safe base64 as base64key:// takes it, mode 0600) on first use.
// mayCreate is asked before a missing key file is created: a deployment
// that already holds sealed payloads or jobs needs its old key restored,
// never a new one.
func openKeeper(ctx context.Context, url, data string, mayCreate func() error) (*secrets.Keeper, string, error) {
	switch {
	case url == "none":
		return nil, "", nil
	case url != "":
		id, err := claimcheck.KeeperID(url)
		if err != nil {
			return nil, "", usagef("--keeper: %v", err)
		}
		k, err := secrets.OpenKeeper(ctx, url)
		if err != nil {
			scheme, _, _ := strings.Cut(url, "://")
			return nil, "", usagef("--keeper %s://…: %v (compiled in: base64key://, awskms://)", scheme, err)
		}
		return k, id, nil
	}
	key, err := localKey(data, keyFileName, mayCreate)
	if err != nil {
		return nil, "", err
	}
	return localsecrets.NewKeeper([32]byte(key)), claimcheck.LocalKeyID(key), nil
}

// keyFilePath is the data directory's key-encryption key file.
func keyFilePath(data string) string { return filepath.Join(data, "keys", keyFileName) }

// localKey reads the 32-byte key in <data>/keys/name, creating it on first
// use unless mayCreate (when set) refuses.
func localKey(data, name string, mayCreate func() error) ([]byte, error) {
	dir := filepath.Join(data, "keys")
	path := filepath.Join(dir, name)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if mayCreate != nil {
			if err := mayCreate(); err != nil {
				return nil, fmt.Errorf("key file %s is missing and %v: restore it from a backup or another host of this deployment (or pass the deployment's key with --keeper base64key://…; `claimcheck keys` prints it where the key is); a new key would make every sealed payload unreadable: %w: %w",
					path, err, errKeyFileMissing, claimcheck.ErrConfig)
			}
		}
		if raw, err = createKeyFile(dir, path); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("read key file %s: %v", path, unwrapPath(err))
	}
	key, err := claimcheck.DecodeLocalKey(string(raw))
	if err != nil {
		return nil, fmt.Errorf("key file %s does not hold 32 bytes in base64 (%v); restore it from backup (what it protects cannot be read without it)", path, err)
	}
	return key, nil
}

// newKeyText is a fresh random key as a key file holds it and base64key://
// takes it: URL-safe base64 (gocloud's localsecrets alphabet).
func newKeyText() (string, error) {
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		return "", fmt.Errorf("generate key: %w", err)
	}
	return encodeKey(key[:]), nil
}

// encodeKey writes a key as key files and base64key:// hold it.
func encodeKey(key []byte) string { return base64.URLEncoding.EncodeToString(key) }

// createKeyFile writes a new random key atomically (O_EXCL: two processes
// starting at once do not make two keys) with mode 0600.
func createKeyFile(dir, path string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key directory %s: %v", dir, unwrapPath(err))
	}
	text, err := newKeyText()
	if err != nil {
		return nil, err
	}
	enc := []byte(text + "\n")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return os.ReadFile(path) // another process made it first
	}
	if err != nil {
		return nil, fmt.Errorf("create key file %s: %v", path, unwrapPath(err))
	}
	if _, err := f.Write(enc); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("write key file %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync key file %s: %v", path, err)
	}
	return enc, f.Close()
}

// deploymentHolds returns an error saying what the deployment already
// holds, jobs or sealed objects, or nil when it holds neither (a missing
// key file may then be created). It reads only: a SQLite file that does not
// exist is not created, and the store is opened without a keeper.
func deploymentHolds(ctx context.Context, storeURL, database, spool string) error {
	if n, err := countJobs(ctx, database); err != nil {
		return fmt.Errorf("the job database cannot be checked for jobs (%v)", err)
	} else if n > 0 {
		return fmt.Errorf("the job database holds %d jobs", n)
	}
	store, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{SpoolDir: spool})
	if err != nil {
		return fmt.Errorf("the store cannot be checked for sealed payloads (%v)", err)
	}
	defer store.Close()
	for _, prefix := range []string{claimcheck.PrefixPayloads, claimcheck.PrefixResults} {
		objs, _, err := store.Bucket().ListPage(ctx, blob.FirstPageToken, 50, &blob.ListOptions{Prefix: prefix})
		if err != nil && !errors.Is(err, io.EOF) { // io.EOF: nothing there
			return fmt.Errorf("the store cannot be checked for sealed payloads (%v)", err)
		}
		for _, o := range objs {
			if claimcheck.IsTempKey(o.Key) || strings.HasSuffix(o.Key, ".attrs") {
				continue
			}
			if sealed, id, _ := store.SealedKey(ctx, o.Key); sealed {
				return fmt.Errorf("the store holds payloads sealed under key id %s", id)
			}
		}
	}
	return nil
}

// countJobs counts the jobs in database; 0 for a SQLite file that does not
// exist or a database without River's tables.
func countJobs(ctx context.Context, database string) (int64, error) {
	t, err := dbopen.Parse(database)
	if err != nil {
		return 0, err
	}
	if t.Dialect == dbopen.SQLite {
		if _, err := os.Stat(t.Path); errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
	}
	db, err := dbopen.Open(ctx, t, &dbopen.Options{MaxConns: 1})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM river_job`).Scan(&n); err != nil {
		return 0, nil //nolint:nilerr // no River schema yet: no jobs
	}
	return n, nil
}
