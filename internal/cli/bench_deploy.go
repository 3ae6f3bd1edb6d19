package cli

// The deployment bench jobs and bench workload measure: the configured
// job database and store, in a scratch space of their own.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// benchEnv is a deployment opened for a bench subcommand; its store and
// database as they are named in the report.
type benchEnv struct {
	*env
	tmp      string
	store    string // the store's URL, with the bench's namespace
	database string // the job database's URL
	// ns is the bench's namespace in --store ("" on the scratch file
	// store): every object under it is deleted by close.
	ns string
}

// openBenchEnv opens the deployment a bench subcommand measures, under
// the data directory data: the job database of --database (default: a
// scratch SQLite file in a fresh directory under data) and the store of
// --store (default: a scratch file store there), with the global flags'
// store settings (--keeper, --secret, --inline-threshold,
// --always-offload, --max-payload-size). Nothing of the deployment's own
// is touched: on --store the bench works in a namespace of its own,
// <prefix>claimcheck-bench-<random>/ (see claimcheck's namespaces), whose
// objects close deletes; on --database under a kind of its own, whose
// jobs the measurement deletes. Without --keeper the data directory's
// key file, if any, is used (a copy in the scratch directory), else a
// fresh one there; with --database, the data directory's key file is
// made first if the deployment holds nothing sealed (as submit makes it),
// so that the keys the job database records stay the deployment's.
func openBenchEnv(ctx context.Context, g *globals, data string) (*benchEnv, error) {
	tmp, err := os.MkdirTemp(data, "bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	b := &benchEnv{tmp: tmp}
	fail := func(err error) (*benchEnv, error) {
		os.RemoveAll(tmp)
		return nil, err
	}
	c := g.inDataDir(tmp, g.database)
	c.stores, c.storeName = nil, ""
	if g.store != "" {
		if c.store, b.ns, err = benchNamespace(g.store); err != nil {
			return fail(usagef("--store: %v", err))
		}
	}
	if g.keeper == "" && g.database != "" {
		// The job database records the keys that sealed its payloads:
		// the bench seals under the deployment's key, made in the data
		// directory on first use as submit makes it, or refused where
		// the database holds payloads sealed under a key not here.
		k, _, err := g.openKeeper(ctx, data, false)
		if err != nil {
			return fail(err)
		}
		k.Close()
	}
	if g.keeper == "" {
		if err := copyKeyFile(keyFilePath(data), keyFilePath(tmp)); err != nil {
			return fail(err)
		}
	}
	if b.env, err = c.open(ctx, openOptions{memOK: true}); err != nil {
		return fail(err)
	}
	b.store, b.database = c.locations(tmp)
	return b, nil
}

// benchNamespace is storeURL with the bench's namespace appended to its
// prefix=, and that namespace.
func benchNamespace(storeURL string) (string, string, error) {
	u, err := url.Parse(storeURL)
	if err != nil {
		return "", "", err
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	q := u.Query()
	ns := q.Get("prefix") + "claimcheck-bench-" + hex.EncodeToString(r[:]) + "/"
	q.Set("prefix", ns)
	u.RawQuery = q.Encode()
	return u.String(), ns, nil
}

// copyKeyFile copies the key file src, if it exists, to dst (mode 0600).
func copyKeyFile(src, dst string) error {
	raw, err := os.ReadFile(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bench: read key file %s: %v", src, unwrapPath(err))
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return os.WriteFile(dst, raw, 0o600)
}

// close deletes the bench's namespace's objects (on --store), closes the
// deployment and removes the scratch directory. Errors: the store's.
func (b *benchEnv) close(ctx context.Context) error {
	var err error
	if b.ns != "" {
		err = deleteAll(ctx, b.env.store.Bucket())
	}
	b.env.Close()
	os.RemoveAll(b.tmp)
	if err != nil {
		return fmt.Errorf("bench: delete the bench's objects under %s: %w", b.ns, err)
	}
	return nil
}

// deleteAll deletes every object of bucket (a store's, which is its
// namespace).
func deleteAll(ctx context.Context, bucket *blob.Bucket) error {
	it := bucket.List(nil)
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return err
		}
	}
}
