package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/claimcheck/claimcheck"
	"github.com/claimcheck/claimcheck/pipeline"
)

// TestClassify: each wrapped core error gets the status, reason and
// permanence the API documents (docs/openapi.yaml), whichever table of
// classify it is found in.
func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("job 7: %w", err) }
	for _, c := range []struct {
		err       error
		status    int
		reason    string
		permanent bool
	}{
		{wrap(pipeline.ErrEmptyPayload), http.StatusUnprocessableEntity, ReasonPayloadEmpty, true},
		{wrap(pipeline.ErrIdempotencyConflict), http.StatusConflict, ReasonIdempotencyConflict, true},
		{wrap(pipeline.ErrPayloadGone), http.StatusConflict, claimcheck.ReasonPayloadMissing, true},
		{wrap(pipeline.ErrJobNotFound), http.StatusNotFound, ReasonJobNotFound, true},
		{wrap(pipeline.ErrNoResult), http.StatusConflict, ReasonNoResult, false},
		{wrap(&http.MaxBytesError{Limit: 10}), http.StatusRequestEntityTooLarge, claimcheck.ReasonPayloadTooLarge, true},
		{wrap(claimcheck.ErrPayloadMissing), http.StatusGone, claimcheck.ReasonPayloadMissing, true},
		{wrap(claimcheck.ErrPayloadCorrupt), http.StatusUnprocessableEntity, claimcheck.ReasonPayloadCorrupt, true},
		{wrap(claimcheck.ErrTicketForbidden), http.StatusForbidden, claimcheck.ReasonTicketForbidden, true},
		{wrap(claimcheck.ErrConfig), http.StatusInternalServerError, claimcheck.ReasonConfig, false},
		{wrap(claimcheck.ErrUnavailable), http.StatusServiceUnavailable, claimcheck.Reason(claimcheck.ErrUnavailable), false},
		{errors.New("something else"), http.StatusServiceUnavailable, claimcheck.Reason(errors.New("x")), false},
	} {
		e := classify(c.err)
		if e.status != c.status || e.Reason != c.reason || e.Permanent != c.permanent {
			t.Errorf("classify(%v) = %d %s permanent=%v, want %d %s permanent=%v", c.err, e.status, e.Reason, e.Permanent, c.status, c.reason, c.permanent)
		}
	}
}
