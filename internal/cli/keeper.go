package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gocloud.dev/secrets"
	_ "gocloud.dev/secrets/awskms" // awskms:// keepers
	"gocloud.dev/secrets/localsecrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/dbopen"
	"github.com/claimcheck/claimcheck/pipeline"
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
//
// A command that only reads (readOnly) never creates a key file: without
// one, and with nothing sealed in the deployment, it runs without a keeper
// (it has nothing to unseal).
func openKeeper(ctx context.Context, url, data string, mayCreate func() (string, error), readOnly bool) (*secrets.Keeper, string, error) {
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
	if readOnly {
		if _, err := os.Stat(keyFilePath(data)); errors.Is(err, os.ErrNotExist) {
			if err := refuseNewKey(keyFilePath(data), mayCreate); err != nil {
				return nil, "", err
			}
			return nil, "", nil
		}
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
// use. mayCreate, when set, is asked first: it says what sealed data the
// deployment holds ("" for nothing), and a key file is then refused
// (ErrConfig naming the file and what to restore) rather than replaced; an
// error (the store or database cannot be read) is returned with its class.
func localKey(data, name string, mayCreate func() (string, error)) ([]byte, error) {
	dir := filepath.Join(data, "keys")
	path := filepath.Join(dir, name)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := refuseNewKey(path, mayCreate); err != nil {
			// A process started at the same moment may have made the key,
			// and recorded it, since the read above: use its key.
			var rerr error
			if raw, rerr = os.ReadFile(path); rerr != nil {
				return nil, err
			}
		} else if raw, err = createKeyFile(dir, path); err != nil {
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

// refuseNewKey returns nil when the missing key file path may be made:
// mayCreate is nil or says the deployment holds nothing sealed. Otherwise
// it is ErrConfig naming the file and what to restore, or the class of the
// error that kept mayCreate from checking.
func refuseNewKey(path string, mayCreate func() (string, error)) error {
	if mayCreate == nil {
		return nil
	}
	holds, err := mayCreate()
	if err != nil {
		// The cause leads: the key file is only why it was looked for.
		return fmt.Errorf("%w (so no new key file %s is made: whether this deployment holds sealed payloads cannot be checked)", err, path)
	}
	if holds != "" {
		return fmt.Errorf("key file %s is missing and %s: restore it from a backup or another host of this deployment (or pass the deployment's key with --keeper base64key://…; `claimcheck keys` prints it where the key is); a new key would make every sealed payload unreadable: %w: %w",
			path, holds, errKeyFileMissing, claimcheck.ErrConfig)
	}
	return nil
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

// createKeyFile writes a new random key with mode 0600, so that path
// appears with the key already in it: the key goes to a temporary file in
// dir, synced, which is then hard-linked to path. The link fails when path
// exists, so two processes starting at once do not make two keys, and the
// one that lost reads the winner's whole key (a file created in place with
// O_EXCL was visible, empty, until its maker wrote it: "key is 0 bytes").
func createKeyFile(dir, path string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key directory %s: %v", dir, unwrapPath(err))
	}
	text, err := newKeyText()
	if err != nil {
		return nil, err
	}
	enc := []byte(text + "\n")
	f, err := os.CreateTemp(dir, ".new-key-*")
	if err != nil {
		return nil, fmt.Errorf("create key file in %s: %v", dir, unwrapPath(err))
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(enc); err != nil {
		f.Close()
		return nil, fmt.Errorf("write key file %s: %v", path, unwrapPath(err))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sync key file %s: %v", path, unwrapPath(err))
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write key file %s: %v", path, unwrapPath(err))
	}
	if err := os.Link(f.Name(), path); errors.Is(err, os.ErrExist) {
		return os.ReadFile(path) // another process made it first, whole
	} else if err != nil {
		return nil, fmt.Errorf("create key file %s: %v", path, unwrapPath(err))
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync() // the new name survives a crash
		d.Close()
		if err != nil {
			return nil, fmt.Errorf("sync key directory %s: %v", dir, unwrapPath(err))
		}
	}
	return enc, nil
}

// deploymentHolds says what sealed data the deployment already holds, ""
// when it holds none, so that a missing key file may be created: the key
// ids its job database records (claimcheck_key, written before anything is
// sealed: docs/invariants.md) and objects in the store sealed under a key.
// Jobs of a deployment run with --keeper none, and plain objects, need no
// key and do not count. It reads only: a SQLite file that does not exist
// is not created, and the store is opened without a keeper. err is set when
// this cannot be checked, which refuses a new key as well: the store's
// error with its class, an unreachable database as
// claimcheck.ErrUnavailable (exit 1), a database that answers but cannot
// be read as claimcheck.ErrConfig (exit 2).
func deploymentHolds(ctx context.Context, storeURL, database, spool string) (string, error) {
	store, err := claimcheck.OpenStore(ctx, storeURL, &claimcheck.Options{SpoolDir: spool})
	if err != nil {
		return "", err
	}
	defer store.Close()
	found, err := store.FindSealed(ctx, 100)
	if err != nil {
		return "", err
	}
	var holds []string
	ids, err := recordedKeys(ctx, database)
	if err != nil {
		return "", err
	}
	if len(ids) > 0 {
		holds = append(holds, "the job database records payloads or results sealed under key id "+strings.Join(ids, ", "))
	}
	if len(found) > 0 {
		ids := make([]string, len(found))
		for i, o := range found {
			ids[i] = claimcheck.KeyIDText(o.KeyID)
		}
		holds = append(holds, "the store holds payloads sealed under key id "+strings.Join(ids, ", "))
	}
	return strings.Join(holds, " and "), nil
}

// recordedKeys returns the key ids the job database records
// (pipeline.RecordedKeyIDs); none for a SQLite file that does not exist or
// a database without claimcheck's or River's tables. Errors: an
// unreachable database is claimcheck.ErrUnavailable; one that answers but
// cannot be read, ErrConfig.
func recordedKeys(ctx context.Context, database string) ([]string, error) {
	t, err := dbopen.Parse(database)
	if err != nil {
		return nil, usagef("--database: %v", err)
	}
	if t.Dialect == dbopen.SQLite {
		if _, err := os.Stat(t.Path); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	db, err := dbopen.Open(ctx, t, &dbopen.Options{MaxConns: 1, MustExist: true})
	if err != nil {
		if !errors.Is(err, claimcheck.ErrUnavailable) && !errors.Is(err, claimcheck.ErrConfig) {
			err = fmt.Errorf("%w: %w", err, claimcheck.ErrConfig)
		}
		return nil, fmt.Errorf("the job database cannot be read: %w", err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("the job database cannot be read: %w", claimcheck.Unavailable("reach "+t.String(), err))
	}
	ids, err := pipeline.RecordedKeyIDs(ctx, db)
	if err != nil {
		if !errors.Is(err, claimcheck.ErrUnavailable) {
			err = fmt.Errorf("%w: %w", err, claimcheck.ErrConfig)
		}
		return nil, fmt.Errorf("the job database cannot be read: %w", err)
	}
	return ids, nil
}
