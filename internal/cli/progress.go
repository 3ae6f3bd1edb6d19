package cli

// The check-in progress bar of run and submit.

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressMin is the payload size, in bytes, from which run and submit show
// a progress bar on standard error while checking in (8 MiB).
const progressMin = 8 << 20

// checkInProgress is a progress bar for checking in size bytes, on w.
type checkInProgress struct {
	bar *progressbar.ProgressBar
	w   io.Writer
}

// newCheckInProgress returns nil (no bar) below progressMin, and when w is
// not a terminal: a redirected standard error gets no carriage-return
// frames. The bar's
// clock starts here, before the first byte is read: progressbar otherwise
// starts it at its first render, so the first update divided a whole
// buffer's bytes by the nanoseconds since that render ("266 GB/s"). The
// blank render that starts the clock also holds the next one back for the
// throttle (100 ms), so no rate is ever taken over less than that, except
// the final one, over the whole check-in.
func newCheckInProgress(w io.Writer, size int64, what string) *checkInProgress {
	if size < progressMin || !isTerminal(w) {
		return nil
	}
	return newProgressBar(w, size, what)
}

// newProgressBar is the bar itself, on w whatever it is (tests read it).
func newProgressBar(w io.Writer, size int64, what string) *checkInProgress {
	return &checkInProgress{w: w, bar: progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("check in "+what),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)}
}

// isTerminal says whether w (through the command's syncWriter) is a
// terminal (golang.org/x/term).
func isTerminal(w io.Writer) bool {
	if s, ok := w.(*syncWriter); ok {
		w = s.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress is for claimcheck.CheckInOptions.Progress: n bytes read so far.
func (p *checkInProgress) progress(n int64) { _ = p.bar.Set64(n) }

// done ends the bar: at 100% when the check-in succeeded, else where it
// stopped.
func (p *checkInProgress) done(err error) {
	if p == nil {
		return
	}
	if err == nil {
		_ = p.bar.Finish()
		return
	}
	_ = p.bar.Exit()
	fmt.Fprintln(p.w)
}
