package cli

import (
	"context"
	"fmt"

	"github.com/claimcheck/claimcheck/internal/bench"
)

// runCompare is bench --compare: claimcheck against the store's plain
// references (bench.CompareStore) in the data directory data, printed as
// a table or JSON.
func (o *benchOptions) runCompare(ctx context.Context, s streams, data string) (err error) {
	g := o.g
	rounds := o.rounds
	if rounds == 1 && !o.roundsSet {
		rounds = 3
	}
	cfg := bench.StoreCompareConfig{StoreURL: g.store, Dir: data, Sizes: o.bytes, Rounds: rounds, Log: s.err}
	if cfg.ProfileDir, err = profileDir(o.profile); err != nil {
		return err
	}
	rep, err := bench.CompareStore(ctx, cfg)
	if err != nil {
		return err
	}
	if err := printReport(s.out, g.json, rep); err != nil {
		return err
	}
	if !rep.Passed() {
		return fmt.Errorf("bench --compare: a goal or check was not met (see the table)")
	}
	return nil
}
