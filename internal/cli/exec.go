package cli

// The --exec handler of work: a command run for each job.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/claimcheck/claimcheck"
)

// exitDataErr is EX_DATAERR from sysexits.h: "the input data was incorrect
// in some way". An --exec command exiting with it fails the job permanently.
const exitDataErr = 65

// execHandler runs argv for each job: the verified payload on its standard
// input, its standard output spooled to a temporary file (memory stays
// constant) and checked in as the result once it exits 0. A job's
// attachments, verified, are files named after them in a directory of
// their own, CLAIMCHECK_ATTACHMENTS_DIR, removed once the command exits.
// Its standard error is not passed through: its last stderrTail bytes,
// quoted onto one line and redacted (redactTail), go with the attempt's
// error, so with its log line; a command that succeeds and wrote there
// gets one line of its own, "handler stderr", on logger (else on stderr).
func execHandler(argv []string, spoolDir string, stderr io.Writer, logger *slog.Logger) claimcheck.Handler {
	return claimcheck.HandlerFunc(func(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
		in, err := job.Payload.Open(ctx)
		if err != nil {
			return nil, err
		}
		defer in.Close()
		env := []string{"CLAIMCHECK_JOB_ID=" + job.ID, "CLAIMCHECK_KIND=" + job.Kind,
			"CLAIMCHECK_TENANT=" + job.Tenant, fmt.Sprintf("CLAIMCHECK_ATTEMPT=%d", job.Attempt)}
		if len(job.Attachments) > 0 {
			dir, err := attachmentsDir(ctx, spoolDir, job.Attachments)
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			env = append(env, "CLAIMCHECK_ATTACHMENTS_DIR="+dir)
		}
		out, err := os.CreateTemp(spoolDir, "claimcheck-exec-*")
		if err != nil {
			return nil, fmt.Errorf("exec: spool output: %v", unwrapPath(err))
		}
		os.Remove(out.Name()) // unlinked: nothing is left behind
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		// Its own process group, ended whole when the job's context is
		// cancelled (drain deadline, second signal, job timeout) and when it
		// exits: a grandchild of sh -c does not outlive it. A killed worker
		// does not leave it running either (runGuarded).
		cmd.WaitDelay = 5 * time.Second
		tail := &tailWriter{max: stderrTail}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, tail
		cmd.Env = append(handlerEnv(), env...)
		if err := runGuarded(cmd); err != nil {
			out.Close()
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == exitDataErr {
				return nil, claimcheck.Permanent(fmt.Errorf("exec %s: exit status %d (EX_DATAERR)%s", argv[0], exitDataErr, tail.suffix()))
			}
			return nil, fmt.Errorf("exec %s: %v%s", argv[0], err, tail.suffix())
		}
		if _, err := out.Seek(0, io.SeekStart); err != nil {
			out.Close()
			return nil, fmt.Errorf("exec: rewind output: %w", err)
		}
		if q := tail.quoted(); q != "" {
			if logger != nil {
				logger.LogAttrs(ctx, slog.LevelInfo, "handler stderr", slog.String("job", job.ID), slog.String("kind", job.Kind),
					slog.Int("attempt", job.Attempt), slog.String("stderr", q))
			} else {
				fmt.Fprintf(stderr, "job %s: handler stderr: %s\n", job.ID, q)
			}
		}
		// The worker rewinds it to retry a check-in, and closes it.
		return &claimcheck.Result{Body: out, ContentType: "application/octet-stream"}, nil
	})
}

// attachmentsDir makes a directory (mode 0700) under spoolDir holding
// each attachment's verified bytes in a file named after it (mode 0600;
// names are plain file names, claimcheck.ValidateAttachmentName). The
// caller removes it. Errors: a claim's (the attachment named), or the
// disk's.
func attachmentsDir(ctx context.Context, spoolDir string, atts map[string]*claimcheck.Payload) (dir string, err error) {
	dir, err = os.MkdirTemp(spoolDir, "claimcheck-attachments-*")
	if err != nil {
		return "", fmt.Errorf("exec: attachments directory: %v: %w", unwrapPath(err), claimcheck.ErrUnavailable)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	for name, p := range atts {
		if err := writeAttachment(ctx, filepath.Join(dir, name), p); err != nil {
			return "", fmt.Errorf("exec: attachment %q: %w", name, err)
		}
	}
	return dir, nil
}

func writeAttachment(ctx context.Context, path string, p *claimcheck.Payload) error {
	r, err := p.Open(ctx) // verified bytes only
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("%v: %w", unwrapPath(err), claimcheck.ErrUnavailable)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write: %v: %w", unwrapPath(err), claimcheck.ErrUnavailable)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write: %v: %w", unwrapPath(err), claimcheck.ErrUnavailable)
	}
	return nil
}

// stderrTail is how much of a failing --exec command's standard error is
// kept with the attempt's error, in bytes.
const stderrTail = 2 << 10

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// suffix is "; stderr: \"…\"" with the kept tail (quoted), or "" if the
// command wrote nothing there.
func (t *tailWriter) suffix() string {
	if q := t.quoted(); q != "" {
		return "; stderr: " + q
	}
	return ""
}

// quoted is the kept tail, redacted (redactTail) and quoted onto one
// line; "" if the command wrote nothing there.
func (t *tailWriter) quoted() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "\uFFFD"))
	if s == "" {
		return ""
	}
	return strconv.Quote(redactTail(s))
}

// sha256Run is a run of 64 hex digits: a SHA-256, as a payload's digest
// and its object key hold it.
var sha256Run = regexp.MustCompile(`[0-9a-fA-F]{64}`)

// redactTail shortens every full SHA-256 in a handler's output to its
// first 12 digits and "…", as claimcheck names payloads (so an object key
// it printed is not kept whole), and drops the value of CLAIMCHECK_SECRET
// should the command have got it some other way.
func redactTail(s string) string {
	s = sha256Run.ReplaceAllStringFunc(s, func(d string) string { return d[:12] + "…" })
	if secret := os.Getenv("CLAIMCHECK_SECRET"); len(secret) >= 8 {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// handlerEnv is this process's environment without the secrets that stay
// with claimcheck: a handler gets verified bytes, not the keys.
func handlerEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "CLAIMCHECK_SECRET=") || strings.HasPrefix(kv, "CLAIMCHECK_KEEPER=")
	})
}
