package cli

// The object stores the command opens (--store URL schemes), each
// registered by importing its package, as gocloud's URL openers are:
// file:// and mem:// come with the root package, s3:// always, gs:// with
// the build tag gcs (stores_gcs.go): Cloud Storage's client links about 250
// packages (gRPC, its metrics exporter), a fifth of the command's weight.
import (
	"context"
	"fmt"
	"strings"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
	_ "github.com/claimcheck/claimcheck/stores/s3store" // s3://
)

// Several named stores (--store NAME=URL, repeatable; docs/stores.md,
// "Named stores"): a producer names the store of a job's payload (submit
// --store-name) and a worker takes only the jobs of the stores it has, so
// workers can be pinned to their region.

// storeSpec is one --store: the store's logical name ("" for the default
// store, claimcheck.DefaultStoreName) and its URL.
type storeSpec struct{ name, url string }

// label names the store for output: its name, "default" for the default
// store.
func (s storeSpec) label() string {
	if s.name == "" {
		return claimcheck.DefaultStoreName
	}
	return s.name
}

// parseStoreSpec parses NAME=URL or URL: a '=' before the URL's first ':'
// separates a name (a URL's scheme holds no '=').
func parseStoreSpec(v string) (storeSpec, error) {
	eq, colon := strings.IndexByte(v, '='), strings.IndexByte(v, ':')
	if eq < 0 || colon >= 0 && colon < eq {
		if v == "" {
			return storeSpec{}, fmt.Errorf("--store: give a URL, or NAME=URL")
		}
		return storeSpec{url: v}, nil
	}
	name, u := v[:eq], v[eq+1:]
	if u == "" {
		return storeSpec{}, fmt.Errorf("--store %s=: give the store's URL after the '='", name)
	}
	if err := pipeline.ValidateStoreName(name); err != nil {
		return storeSpec{}, fmt.Errorf("--store %s=…: %v", name, err)
	}
	if name == claimcheck.DefaultStoreName {
		name = ""
	}
	return storeSpec{name: name, url: u}, nil
}

// storeFlag is --store: repeatable, each a URL (the default store) or
// NAME=URL (a named store), its default CLAIMCHECK_STORE's list
// (whitespace-separated: a URL holds no raw whitespace, RFC 3986), which
// the first --store given replaces.
type storeFlag struct {
	g       *globals
	fromEnv bool
}

func (f *storeFlag) String() string { return f.g.store }
func (f *storeFlag) Type() string   { return "string" }

func (f *storeFlag) Set(v string) error {
	if f.fromEnv {
		f.g.stores, f.g.storeErr, f.fromEnv = nil, nil, false
	}
	f.g.addStore(v)
	return nil
}

// setEnv takes CLAIMCHECK_STORE's stores as the default.
func (f *storeFlag) setEnv(v string) {
	for _, field := range strings.Fields(v) {
		f.g.addStore(field)
	}
	f.fromEnv = true
}

// addStore records one --store, keeping the first error for validate (a
// flag's own error would lose the exit status 2 message's context), and
// recomputes the primary store.
func (g *globals) addStore(v string) {
	spec, err := parseStoreSpec(v)
	if err == nil && !gcsCompiled && strings.HasPrefix(spec.url, "gs://") {
		err = fmt.Errorf("--store gs://…: Cloud Storage is compiled into claimcheck only with the build tag gcs: go install -tags gcs ./cmd/claimcheck")
	}
	if err == nil {
		for _, s := range g.stores {
			switch {
			case s.name == spec.name && s.name == "":
				err = fmt.Errorf("--store: two stores without a name: name all but the default one, NAME=URL")
			case s.name == spec.name:
				err = fmt.Errorf("--store: two stores named %q: give each its own name", spec.name)
			}
		}
	}
	if err != nil {
		if g.storeErr == nil {
			g.storeErr = err
		}
		return
	}
	g.stores = append(g.stores, spec)
	g.store, g.storeName = g.stores[0].url, g.stores[0].name
	for _, s := range g.stores {
		if s.name == "" {
			g.store, g.storeName = s.url, ""
		}
	}
}

// storeSpecs are the stores to open for data directory data, the primary
// one (submit's default) first: every --store, or the data directory's
// file store when none is given.
func (g *globals) storeSpecs(data string) []storeSpec {
	primary, _ := g.locations(data)
	specs := []storeSpec{{name: g.storeName, url: primary}}
	for _, s := range g.stores {
		if s.name != g.storeName {
			specs = append(specs, s)
		}
	}
	return specs
}

// storeLabels names the stores opened, for messages: "default, eu, us".
func (e *env) storeLabels() string {
	names := make([]string, len(e.specs))
	for i, s := range e.specs {
		names[i] = s.label()
	}
	return strings.Join(names, ", ")
}

// storeFor is the opened store holding t's object (the primary store for
// an inline ticket) and the URL it was opened with. Errors:
// pipeline.ErrStoreNotConfigured for a store this command was not given.
func (e *env) storeFor(t *claimcheck.Ticket) (*claimcheck.Store, string, error) {
	name := ""
	if !t.IsInline() {
		name = t.Store
	}
	st, err := e.pipe.StoreNamed(name)
	if err != nil {
		return nil, "", err
	}
	for i, s := range e.stores {
		if s == st {
			return st, e.specs[i].url, nil
		}
	}
	return st, "", nil
}

// readManifest reads t's manifest from its store.
func (e *env) readManifest(ctx context.Context, t *claimcheck.Ticket) (*claimcheck.Manifest, error) {
	st, _, err := e.storeFor(t)
	if err != nil {
		return nil, err
	}
	return st.ReadManifest(ctx, t)
}
