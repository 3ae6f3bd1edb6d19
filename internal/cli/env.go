package cli

// Opening a data directory: the store, the job database and the keeper a subcommand works on.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"gocloud.dev/secrets"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// env is an opened data directory: stores and pipeline.
type env struct {
	store *claimcheck.Store // the primary store (globals.store)
	// stores are every store opened, the primary first, each with the
	// --store it came from (specs).
	stores []*claimcheck.Store
	specs  []storeSpec
	pipe   *pipeline.Pipeline
	data   string
	keeper *secrets.Keeper
	// created: this command made the data directory; refused: the
	// command was refused before it stored anything (refuse), so Close
	// removes what it made and a refusal leaves the file system as it was.
	created, refused bool
}

// refuse marks the command refused before it stored anything and returns
// err: Close then removes the data directory if this command created it.
func (e *env) refuse(err error) error {
	e.refused = true
	return err
}

func (e *env) spoolDir() string { return filepath.Join(e.data, "tmp") }

func (e *env) Close() {
	e.pipe.Close()
	for _, st := range e.stores {
		st.Close()
	}
	if e.keeper != nil {
		e.keeper.Close()
	}
	if e.refused && e.created {
		os.RemoveAll(e.data)
	}
}

// locations are the store and job database URLs: --store and --database,
// or the data directory's file store and SQLite file.
func (g *globals) locations(data string) (storeURL, database string) {
	storeURL, database = g.store, g.database
	if storeURL == "" {
		storeURL = "file://" + filepath.ToSlash(filepath.Join(data, "objects"))
	}
	if database == "" {
		database = "sqlite://" + filepath.ToSlash(filepath.Join(data, "claimcheck.db"))
	}
	return storeURL, database
}

// openKeeper is openKeeper for this command's --keeper and data directory
// data: a missing key file is made only when the deployment (its store and
// job database) holds nothing sealed.
func (g *globals) openKeeper(ctx context.Context, data string, readOnly bool) (*secrets.Keeper, string, error) {
	storeURL, database := g.locations(data)
	spool := (&env{data: data}).spoolDir()
	return openKeeper(ctx, g.keeper, data, func() (string, error) { return deploymentHolds(ctx, storeURL, database, spool) }, readOnly)
}

// openOptions are what a subcommand asks of open beyond the global flags;
// the zero value suits a command that submits or works.
type openOptions struct {
	// readOnly: the command does not set up a deployment, so a missing job
	// database, the data directory's or a --database sqlite:// file, is an
	// error (exit 2) rather than a new empty one. Only the commands that set
	// up or use a deployment (submit, work, run, relay, doctor, verify,
	// migrate, bench) create a SQLite job database.
	readOnly bool
	// makeKey (with readOnly): a missing key file is made as submit makes
	// it, because the command checks payloads in (serve's HTTP API): with
	// readOnly alone it would store them unencrypted.
	makeKey bool
	// memOK: the command submits and works in this one process, so a
	// mem:// store is usable.
	memOK bool
	// tenants are the only tenants whose payloads are claimed (work
	// --tenant); none: every tenant.
	tenants []string
	// sqliteCacheKiB is SQLite's page cache in KiB (relay: a small one);
	// 0: the pipeline's default.
	sqliteCacheKiB int
	// alwaysOffload stores every payload as an object, as --always-offload
	// does, whatever that flag says.
	alwaysOffload bool
	// noWrites (with readOnly): the command only reads and writes nothing
	// at all, so it works on a read-only copy (a snapshot, a backup being
	// inspected, a chmod a-w directory even for root): no write probe, no
	// key file created (without one, encrypted payloads cannot be read),
	// temporary files in the system's temporary directory, the SQLite file
	// opened read-only (pipeline.Config.NoWrites). For jobs, inspect,
	// result, dead and sweep --dry-run.
	noWrites bool
}

// open checks the data directory is writable, then opens the store and the
// pipeline, as the global flags and o say. Every error names what to fix.
func (g *globals) open(ctx context.Context, o openOptions) (*env, error) {
	data, err := filepath.Abs(g.data)
	if err != nil {
		return nil, fmt.Errorf("data directory %q: %w", g.data, err)
	}
	// A --store file:// directory is made on first use only where its
	// parent exists: /nonexistent/objects is a typo, not a tree to make.
	for _, s := range g.stores {
		if u, err := url.Parse(s.url); err == nil && u.Scheme == "file" && u.Path != "" {
			if parent := filepath.Dir(filepath.FromSlash(u.Path)); !isDir(parent) {
				return nil, usagef("--store %s: the file store directory's parent %s does not exist (or is not a directory): create it first, or check the URL", s.label(), parent)
			}
		}
	}
	created := false
	switch {
	case o.noWrites && g.database != "" && g.store != "":
		// The job database and the store are elsewhere (a new host of a
		// PostgreSQL deployment): a read-only command needs no data
		// directory, and makes none.
	case o.noWrites:
		// A read-only data directory (a snapshot, a backup) is fine:
		// nothing is written to it.
		if st, err := os.Stat(data); err != nil || !st.IsDir() {
			hint := ""
			if g.database != "" {
				hint = "; on a new host of a deployment whose job database is elsewhere, give the deployment's --store too, and no data directory is needed"
			}
			return nil, fmt.Errorf("data directory %s holds no claimcheck data (not a directory, or missing): check --data or CLAIMCHECK_DATA%s", data, hint)
		}
	default:
		_, err := os.Stat(data)
		created = errors.Is(err, os.ErrNotExist)
		if err := ensureWritable(data); err != nil {
			return nil, err
		}
	}
	// A refusal from here on removes the data directory this command made.
	undo := func(err error) (*env, error) {
		if created {
			os.RemoveAll(data)
		}
		return nil, err
	}
	var secret []byte
	if g.secretHex != "" {
		if secret, err = hex.DecodeString(g.secretHex); err != nil || len(secret) < 16 {
			return undo(usagef("--secret must be at least 16 bytes written in hex (e.g. from: openssl rand -hex 32)"))
		}
	}
	if slices.ContainsFunc(g.stores, func(s storeSpec) bool { return strings.HasPrefix(s.url, "mem://") }) && !o.memOK {
		return undo(usagef("--store mem:// keeps objects only inside one process, so a later command would find every payload missing; use it with run or bench, or use a file:// or s3:// store"))
	}
	_, database := g.locations(data)
	if g.database == "" {
		if _, err := os.Stat(filepath.Join(data, "claimcheck.db")); o.readOnly && errors.Is(err, os.ErrNotExist) {
			return undo(fmt.Errorf("no claimcheck data in %s (no job database there): check --data or CLAIMCHECK_DATA, or submit jobs first", data))
		}
	}
	threshold := g.inlineThreshold
	if threshold == 0 {
		threshold = -1 // --inline-threshold 0: nothing travels inline
	}
	spool := (&env{data: data}).spoolDir()
	if o.noWrites {
		spool = os.TempDir() // a result being verified: not in the data directory
	}
	keeper, keyID, err := g.openKeeper(ctx, data, o.readOnly && !o.makeKey)
	if err != nil {
		return undo(err)
	}
	tel, err := g.telemetry(ctx)
	if err != nil {
		if keeper != nil {
			keeper.Close()
		}
		return undo(err)
	}
	e := &env{data: data, keeper: keeper, specs: g.storeSpecs(data), created: created}
	fail := func(err error) (*env, error) {
		for _, st := range e.stores {
			st.Close()
		}
		if keeper != nil {
			keeper.Close()
		}
		return undo(err)
	}
	for _, spec := range e.specs {
		st, err := claimcheck.OpenStore(ctx, spec.url, &claimcheck.Options{
			MeterProvider:   tel.MeterProvider(),
			TracerProvider:  tel.TracerProvider(),
			Name:            spec.name,
			Secret:          secret,
			SignTickets:     secret != nil,
			Keeper:          keeper,
			KeeperID:        keyID,
			Tenants:         o.tenants,
			InlineThreshold: threshold,
			AlwaysOffload:   g.alwaysOffload || o.alwaysOffload,
			MaxPayloadSize:  g.maxPayloadSize,
			SpoolDir:        spool,
		})
		if err != nil {
			if len(e.specs) > 1 {
				err = fmt.Errorf("store %s: %w", spec.label(), err)
			}
			return fail(err)
		}
		e.stores = append(e.stores, st)
	}
	e.store = e.stores[0]
	logger, err := g.logger()
	if err != nil {
		return fail(err)
	}
	e.pipe, err = pipeline.Open(ctx, pipeline.Config{Database: database, Store: e.store, Stores: e.stores[1:], Retry: claimcheck.RetryPolicy{MaxAttempts: g.maxAttempts}, Logger: logger, SQLiteCacheKiB: o.sqliteCacheKiB, Lease: testLease,
		ReadOnly: o.readOnly, MustExist: o.readOnly, NoWrites: o.noWrites})
	if err != nil {
		return fail(err)
	}
	for _, st := range e.pipe.NamespaceUnchecked() {
		fmt.Fprintf(g.stderr, "warning: store %s is unavailable: which job database owns its namespace is not checked; showing what the job database holds\n", st)
	}
	return e, nil
}

// logger is the --log-level logger on standard error, or nil when off.
func (g *globals) logger() (*slog.Logger, error) {
	if g.logLevel == "" {
		return nil, nil
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usagef("--log-level %q: use debug, info, warn or error", g.logLevel)
	}
	return slog.New(g.logHandler(g.stderr, &slog.HandlerOptions{Level: level})), nil
}

// logHandler is the --log-format handler writing to w: slog's
// JSONHandler (json) or TextHandler (text).
func (g *globals) logHandler(w io.Writer, opts *slog.HandlerOptions) slog.Handler {
	if g.logFormat == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}

// logsAttempt reports whether logger writes the per-attempt line of an
// attempt that came to state (pipeline's: WARN for a dead letter, else
// INFO); when it does not, the command says a failed attempt itself,
// so each attempt has one line either way.
func logsAttempt(logger *slog.Logger, state pipeline.JobState) bool {
	level := slog.LevelInfo
	if state == pipeline.JobDead {
		level = slog.LevelWarn
	}
	return logger != nil && logger.Enabled(context.Background(), level)
}

// ensureWritable creates dir if needed and proves a file can be written in
// it, so a read-only data directory fails up front with a clear message
// rather than half-way through a job.
func ensureWritable(dir string) error {
	hint := "choose another with --data or CLAIMCHECK_DATA"
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("data directory %s cannot be created (%v); %s", dir, unwrapPath(err), hint)
	}
	f, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("data directory %s is not writable (%v); %s", dir, unwrapPath(err), hint)
	}
	f.Close()
	return os.Remove(f.Name())
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ensureFree refuses, with a usage error (exit 2, nothing written), a
// command that would write about need bytes into dir when its file system
// has less free (diskFree), so that a bench too large for the disk stops
// before its first byte rather than filling the disk; flag names what
// decides need, for the message. Where the free space cannot be told, it
// lets the command run.
func ensureFree(dir string, need uint64, flag string) error {
	free, ok := diskFree(dir)
	if !ok || free >= need {
		return nil
	}
	return usagef("%s needs about %s free under %s, which has %s: nothing was written; give a smaller %s, or --data on a larger disk",
		flag, humanize.IBytes(need), dir, humanize.IBytes(free), flag)
}

// isDir says whether path is an existing directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// testLease, when set, is the job lease (pipeline.Config.Lease) instead of
// pipeline.DefaultLease. Only the package's tests set it (TestMain, from
// CLAIMCHECK_TEST_LEASE when the test binary runs as the command), so that
// a fault trial's killed worker is rescued in seconds rather than minutes;
// the command itself has no lease setting.
var testLease time.Duration
