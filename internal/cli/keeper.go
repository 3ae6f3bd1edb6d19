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
)

// keyFileName is the local key-encryption key of the embedded default,
// created on first use under <data>/keys with mode 0600.
const keyFileName = "kek.key"

// openKeeper opens the keeper that wraps payload data keys: the URL given,
// none for "none", or by default the local key file in the data directory,
// created (32 random bytes, base64, mode 0600) on first use.
func openKeeper(ctx context.Context, url, data string) (*secrets.Keeper, error) {
	switch {
	case url == "none":
		return nil, nil
	case url != "":
		k, err := secrets.OpenKeeper(ctx, url)
		if err != nil {
			scheme, _, _ := strings.Cut(url, "://")
			return nil, usagef("--keeper %s://…: %v (compiled in: base64key://, awskms://)", scheme, err)
		}
		return k, nil
	}
	key, err := localKey(data, keyFileName)
	if err != nil {
		return nil, err
	}
	return localsecrets.NewKeeper([32]byte(key)), nil
}

// localKey reads the 32-byte key in <data>/keys/name, creating it on first
// use.
func localKey(data, name string) ([]byte, error) {
	dir := filepath.Join(data, "keys")
	path := filepath.Join(dir, name)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if raw, err = createKeyFile(dir, path); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("read key file %s: %v", path, unwrapPath(err))
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || len(key) != 32 {
		return nil, fmt.Errorf("key file %s does not hold 32 bytes in base64; restore it from backup (what it protects cannot be read without it)", path)
	}
	return key, nil
}

// createKeyFile writes a new random key atomically (O_EXCL: two processes
// starting at once do not make two keys) with mode 0600.
func createKeyFile(dir, path string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key directory %s: %v", dir, unwrapPath(err))
	}
	key, err := localsecrets.NewRandomKey()
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	enc := []byte(base64.StdEncoding.EncodeToString(key[:]) + "\n")
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
