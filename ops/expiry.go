package ops

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"gocloud.dev/gcerrors"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/lifecycle"
)

// ExpiryDays returns the expiry, in days, that the bucket's lifecycle
// configuration applies to every object under prefix (the shortest rule
// covering the whole prefix) and that rule's name. ok is false when the
// expiry is unknown: the store's driver manages no lifecycle configuration
// (lifecycle.ManagerOf: a file store's expiry is the sweeper's --expire
// flags), no rule covers the prefix, or the configuration cannot be read,
// in which case err says why. storeURL is the URL st was opened with; its
// scheme alone is read.
func ExpiryDays(ctx context.Context, st *claimcheck.Store, storeURL, prefix string) (days int, rule string, ok bool, err error) {
	m, merr := lifecycle.ManagerOf(st)
	if merr != nil {
		if scheme, _ := storeScheme(storeURL); scheme == "s3" {
			return 0, "", false, errors.New("the s3:// store exposes no S3 client")
		}
		return 0, "", false, nil
	}
	cfg, err := m.ReadLifecycle(ctx, "")
	if err != nil {
		return 0, "", false, err
	}
	e := evaluateExpiry(cfg.Rules, prefix, 0)
	return e.cover, e.coverRule, e.cover > 0, nil
}

// lifecycleCache holds each bucket's lifecycle configuration as first read
// by StartupExpiry in this process, keyed by the store's lifecycle.Manager
// (one per opened store) and bucket.
var lifecycleCache sync.Map // lifecycleKey → *lifecycleRead

type lifecycleKey struct {
	m      lifecycle.Manager
	bucket string
}

type lifecycleRead struct {
	once sync.Once
	cfg  *lifecycle.Configuration
	err  error
}

// StartupExpiry is the start-up retention check of submit and work: on
// a store whose driver manages a lifecycle configuration (S3:
// lifecycle.ManagerOf), the expiry rows Doctor reports for payloads/ and
// results/ (inside the store's namespace) that fail against r, the
// lifetimes `claimcheck retention` computes from the same settings: a rule
// that expires objects, or moves them to an archive tier, sooner than
// required, or on a fixed date. nil when nothing fails, and for stores
// without a lifecycle engine claimcheck can read (file://, where the
// sweeper's --expire flags set expiry; gs://). The bucket's lifecycle
// configuration is read once per process and store (cached: a later call
// does not see a rule changed since). err says why the configuration could
// not be read (the credentials may lack s3:GetLifecycleConfiguration), and
// checks is then nil.
func StartupExpiry(ctx context.Context, st *claimcheck.Store, r *claimcheck.Retention) (checks []Check, err error) {
	m, merr := lifecycle.ManagerOf(st)
	if merr != nil {
		if scheme, _ := storeScheme(st.Location()); scheme == "s3" {
			return nil, errors.New("the s3:// store exposes no S3 client")
		}
		return nil, nil
	}
	bucket := m.LifecycleBucket()
	key := lifecycleKey{m, bucket}
	v, _ := lifecycleCache.LoadOrStore(key, &lifecycleRead{})
	lr := v.(*lifecycleRead)
	lr.once.Do(func() {
		lr.cfg, lr.err = m.ReadLifecycle(ctx, "")
		if lr.err != nil {
			lr.err = fmt.Errorf("read the lifecycle configuration of bucket %s: %s", bucket, lifecycleErrText(lr.err))
		}
	})
	if lr.err != nil {
		lifecycleCache.CompareAndDelete(key, lr) // try again next time
		return nil, lr.err
	}
	rows, _ := expiryRows(lr.cfg.Rules, lr.cfg.Found, bucket, st.Namespace(), r)
	for _, row := range rows {
		if strings.HasPrefix(row.Name, CheckExpiry) && row.Status == StatusFail {
			checks = append(checks, row)
		}
	}
	return checks, nil
}

// lifecycleErrText names why a lifecycle configuration could not be read:
// the store's error code (lifecycle.StoreError.Text), else the cause
// claimcheck names, else gocloud's code.
func lifecycleErrText(err error) string {
	var se *lifecycle.StoreError
	if errors.As(err, &se) {
		return se.Text()
	}
	if why, _ := claimcheck.CauseOf(err); why != "" {
		return why
	}
	return fmt.Sprintf("store code %v", gcerrors.Code(err))
}
