package cli

// The global flags every subcommand shares, with their environment variables.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/internal/bench"
	"github.com/claimcheck/claimcheck/pipeline"
)

// globals are the flags every subcommand shares; each has an environment
// variable that sets its default. Subcommands read them and never write
// them: a subcommand's own settings are in its options (see options).
type globals struct {
	data string
	// benchBaseline is the reference bench measures beside claimcheck on
	// an s3:// store: nil in the shipped command, set by the lab's
	// Extension (Lab.SetBenchBaseline).
	benchBaseline bench.BaselineFunc
	// store is the URL of the store submit uses when --store-name names
	// none (the primary store, stores.go): the unnamed --store, else the
	// first named one; "" for the data directory's file store. storeName
	// is its logical name ("" for claimcheck.DefaultStoreName), stores
	// every --store as given, storeErr the first bad one.
	store           string
	storeName       string
	stores          []storeSpec
	storeErr        error
	database        string
	secretHex       string
	keeper          string
	inlineThreshold int64
	alwaysOffload   bool
	maxPayloadSize  int64
	maxAttempts     int
	json            bool
	logLevel        string
	logFormat       string
	stderr          io.Writer
	// tel is the command's OpenTelemetry, made on first use (telemetry),
	// shared by the copies inDataDir makes.
	tel         *telState
	envErrs     []error
	brokerURL   string
	destination string
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// envInt is the integer in environment variable name, or def; a value that
// does not parse is recorded in errs and reported before any command runs.
func envInt(name string, def int64, errs *[]error) int64 {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("%s=%q is not an integer", name, v))
		return def
	}
	return n
}

// envBool is true for 1/true/yes, false for 0/false/no or unset; anything
// else is recorded in errs.
func envBool(name string, errs *[]error) bool {
	switch v := strings.ToLower(os.Getenv(name)); v {
	case "", "0", "false", "no":
		return false
	case "1", "true", "yes":
		return true
	default:
		*errs = append(*errs, fmt.Errorf("%s=%q: use 1 or 0", name, v))
		return false
	}
}

// validate checks the global settings before a command runs.
func (g *globals) validate() error {
	if len(g.envErrs) > 0 {
		return usageError{errors.Join(g.envErrs...)}
	}
	if g.storeErr != nil {
		return usageError{g.storeErr}
	}
	switch {
	case g.logFormat != "text" && g.logFormat != "json":
		return usagef("--log-format %q: use text or json", g.logFormat)
	case g.inlineThreshold < 0 || g.inlineThreshold > claimcheck.MaxInlineThreshold:
		return usagef("--inline-threshold %d: use 0 (nothing inline) to %d bytes", g.inlineThreshold, claimcheck.MaxInlineThreshold)
	case g.maxPayloadSize < 0:
		return usagef("--max-payload-size %d: use 0 (no limit) or a positive number of bytes", g.maxPayloadSize)
	case g.maxAttempts < 1 || g.maxAttempts > 1000:
		return usagef("--max-attempts %d: use 1 to 1000", g.maxAttempts)
	}
	if err := pipeline.ValidateDestination(g.destination); err != nil {
		return usagef("--destination: %v", err)
	}
	return nil
}

// inDataDir is a copy of g for the data directory dir and the job database
// database ("": the SQLite file in dir); g is left as it is. bench relay
// gives each backlog its own.
func (g *globals) inDataDir(dir, database string) *globals {
	c := *g
	c.data, c.database = dir, database
	return &c
}
