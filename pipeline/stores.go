package pipeline

// Named stores and region pinning (docs/stores.md, "Named stores").
//
// A pipeline has a default store (Config.Store) and any number of further
// named ones (Config.Stores), each known by its logical name
// (claimcheck.Options.Name), the name its tickets carry. A job belongs to
// the store its producer named (EnqueueOptions.Store): its payload,
// attachments and result live there, and it waits in a River queue of that
// store and its kind, StoreQueue. A worker subscribes only to the queues of
// the stores it has, so a job of a store it lacks is never fetched by it,
// let alone dead-lettered: it waits for a worker that has the store. Jobs of
// the store named claimcheck.DefaultStoreName keep the queue named after
// their kind alone, the queue every job had before named stores existed.

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/claimcheck/claimcheck"
)

// maxQueueLen is River's limit on a queue name, in bytes (validateQueueName
// in river's client.go, v0.51).
const maxQueueLen = 64

// ErrStoreNotConfigured is returned (wrapped, with claimcheck.ErrConfig)
// for a store name that is not one of this pipeline's stores: an
// EnqueueOptions.Store, or the store of a ticket being read (a result, a
// replayed job's payload). Its message names the store and the ones
// configured.
var ErrStoreNotConfigured = errors.New("store not configured in this process")

var storeNameRegexp = regexp.MustCompile(`^[a-z0-9]+(?:-[a-z0-9]+)*$`)

// ValidateStoreName checks the logical name of a pipeline's store other
// than claimcheck.DefaultStoreName: 1 to claimcheck.MaxStoreNameLen (16)
// bytes of a-z and 0-9 with single '-' between them. It is stricter than a
// ticket's store name (which also allows '_'), because the name is part of
// its jobs' River queue names (StoreQueue), whose '_' separates it from the
// kind. It returns a plain error describing the problem.
func ValidateStoreName(name string) error {
	if name == claimcheck.DefaultStoreName {
		return nil
	}
	if name == "" || len(name) > claimcheck.MaxStoreNameLen || !storeNameRegexp.MatchString(name) {
		shown := name
		if len(shown) > 32 {
			shown = shown[:32] + "…"
		}
		return fmt.Errorf("store name %q (%d bytes) is invalid: use 1 to %d characters a-z, 0-9, single '-' between them", shown, len(name), claimcheck.MaxStoreNameLen)
	}
	return nil
}

// StoreQueue is the River queue of the jobs of kind whose payloads are in
// store: the kind itself for claimcheck.DefaultStoreName (or ""), else
// "claimcheck-store-STORE_KIND". River limits queue names to 64 bytes, so
// a kind of a named store can be at most 64-18-len(store) bytes long: a
// longer one is an error naming both (and the limit), as is an invalid
// store name or kind.
func StoreQueue(store, kind string) (string, error) {
	if err := ValidateKind(kind); err != nil {
		return "", err
	}
	if store == "" || store == claimcheck.DefaultStoreName {
		return kind, nil
	}
	if err := ValidateStoreName(store); err != nil {
		return "", err
	}
	q := storeQueuePrefix + store + "_" + kind
	if len(q) > maxQueueLen {
		return "", fmt.Errorf("kind %q in store %q: their queue name %q is %d bytes, River allows %d: use a kind of at most %d bytes in this store, or a shorter store name",
			kind, store, q, len(q), maxQueueLen, maxQueueLen-len(storeQueuePrefix)-len(store)-1)
	}
	return q, nil
}

// initStores checks cfg's stores and indexes them by name: the default
// store first, then Config.Stores. Errors: claimcheck.ErrConfig for a nil
// store, two stores of one name, an invalid name, or an inline threshold
// whose tickets exceed the maximum message size.
func initStores(cfg *Config) (map[string]*claimcheck.Store, []string, error) {
	all := append([]*claimcheck.Store{cfg.Store}, cfg.Stores...)
	byName := make(map[string]*claimcheck.Store, len(all))
	names := make([]string, 0, len(all))
	for i, s := range all {
		if s == nil {
			return nil, nil, fmt.Errorf("pipeline: store %d of Config.Stores is nil: %w", i, claimcheck.ErrConfig)
		}
		if err := ValidateStoreName(s.Name()); err != nil {
			return nil, nil, fmt.Errorf("pipeline: %v: %w", err, claimcheck.ErrConfig)
		}
		if byName[s.Name()] != nil {
			return nil, nil, fmt.Errorf("pipeline: two stores are named %q: give each its own name: %w", s.Name(), claimcheck.ErrConfig)
		}
		if need := claimcheck.InlineTicketSize(s.InlineThreshold()) + argsOverhead; need > cfg.MaxMessageSize {
			return nil, nil, fmt.Errorf("pipeline: store %s: inline threshold of %d bytes makes job arguments of up to %d bytes, above the maximum message size of %d bytes: %w",
				s.Name(), s.InlineThreshold(), need, cfg.MaxMessageSize, claimcheck.ErrConfig)
		}
		byName[s.Name()] = s
		names = append(names, s.Name())
	}
	return byName, names, nil
}

// Stores are the pipeline's stores: the default store (Config.Store)
// first, then Config.Stores in order.
func (p *Pipeline) Stores() []*claimcheck.Store {
	out := make([]*claimcheck.Store, len(p.storeNames))
	for i, n := range p.storeNames {
		out[i] = p.stores[n]
	}
	return out
}

// StoreNamed is the pipeline's store of that logical name ("" is the
// default store). Errors: ErrStoreNotConfigured (with claimcheck.ErrConfig)
// naming the stores configured.
func (p *Pipeline) StoreNamed(name string) (*claimcheck.Store, error) {
	if name == "" {
		return p.store, nil
	}
	if s := p.stores[name]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("pipeline: store %q: %w (this process has %s): %w", name, ErrStoreNotConfigured, p.storeList(), claimcheck.ErrConfig)
}

// storeList names the configured stores for messages: "eu, us".
func (p *Pipeline) storeList() string {
	names := slices.Clone(p.storeNames)
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// storeFor is the store holding t's object: the one its ticket names, or
// the default store for an inline ticket (which names none).
func (p *Pipeline) storeFor(t *claimcheck.Ticket) (*claimcheck.Store, error) {
	if t == nil || t.IsInline() {
		return p.store, nil
	}
	return p.StoreNamed(t.Store)
}
