// Package resulturl makes short-lived signed URLs for job results and serves
// them, so a customer can fetch a result without the application proxying
// it and without any credential of the store.
//
// A URL is made on demand and never stored in a ticket or a message:
//
//	<base>/v1/results/<job id>?exp=<unix seconds>&sig=<base64url HMAC-SHA256>
//
// The signature covers the path and the expiry, so changing any character
// of either, or of the signature, makes the URL fail; an expired URL fails
// even when correctly signed. The handler verifies the URL, then streams the
// result verified against its ticket (and decrypted, when the store encrypts
// payloads: a URL presigned by S3 itself would hand out ciphertext).
package resulturl

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/claimcheck/claimcheck"
)

// PathPrefix is the path under which results are served.
const PathPrefix = "/v1/results/"

// MaxTTL bounds a URL's lifetime: a signed URL is a bearer token, and the
// usual advice is to keep its expiry short (docs/invariants.md).
const MaxTTL = 7 * 24 * time.Hour

// ErrURL is returned (wrapped) for a URL that is malformed, tampered with,
// or expired.
var ErrURL = errors.New("invalid or expired result URL")

// Signer makes and checks result URLs.
type Signer struct {
	// Key is the HMAC key, at least 32 bytes, held by the server only.
	Key []byte
	// BaseURL is where the Handler is reachable, e.g. https://files.example.com.
	BaseURL string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (s *Signer) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Signer) mac(path string, exp int64) string {
	m := hmac.New(sha256.New, s.Key)
	fmt.Fprintf(m, "claimcheck/result-url/v1\nGET\n%s\n%d", path, exp)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Sign returns a URL for job's result valid for ttl (1 second to MaxTTL).
func (s *Signer) Sign(jobID int64, ttl time.Duration) (string, error) {
	if len(s.Key) < 32 {
		return "", fmt.Errorf("resulturl: signing key must be at least 32 bytes: %w", claimcheck.ErrConfig)
	}
	if ttl < time.Second || ttl > MaxTTL {
		return "", fmt.Errorf("resulturl: ttl %s outside 1s to %s: %w", ttl, MaxTTL, claimcheck.ErrConfig)
	}
	base, err := url.Parse(s.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return "", fmt.Errorf("resulturl: base URL %q must be http(s)://host[:port]: %w", s.BaseURL, claimcheck.ErrConfig)
	}
	path := strings.TrimSuffix(base.Path, "/") + PathPrefix + strconv.FormatInt(jobID, 10)
	exp := s.now().Add(ttl).Unix()
	q := url.Values{"exp": {strconv.FormatInt(exp, 10)}, "sig": {s.mac(PathPrefix+strconv.FormatInt(jobID, 10), exp)}}
	return (&url.URL{Scheme: base.Scheme, Host: base.Host, Path: path, RawQuery: q.Encode()}).String(), nil
}

// Verify checks a request's path (as the Handler sees it: a base path in
// BaseURL is for a reverse proxy that strips it) and query, and returns the
// job id.
// Errors wrap ErrURL.
func (s *Signer) Verify(path string, query url.Values) (int64, error) {
	if !strings.HasPrefix(path, PathPrefix) || len(query) != 2 || len(query["exp"]) != 1 || len(query["sig"]) != 1 {
		return 0, fmt.Errorf("resulturl: malformed: %w", ErrURL)
	}
	rest := path[len(PathPrefix):]
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != rest {
		return 0, fmt.Errorf("resulturl: malformed job id: %w", ErrURL)
	}
	exp, err := strconv.ParseInt(query.Get("exp"), 10, 64)
	if err != nil || strconv.FormatInt(exp, 10) != query.Get("exp") {
		return 0, fmt.Errorf("resulturl: malformed expiry: %w", ErrURL)
	}
	if !hmac.Equal([]byte(s.mac(PathPrefix+rest, exp)), []byte(query.Get("sig"))) {
		return 0, fmt.Errorf("resulturl: bad signature: %w", ErrURL)
	}
	if s.now().Unix() >= exp {
		return 0, fmt.Errorf("resulturl: expired: %w", ErrURL)
	}
	return id, nil
}

// Opener opens a job's verified result: pipeline.Pipeline.OpenResult fits.
type Opener func(ctx context.Context, jobID int64) (io.ReadCloser, *claimcheck.Ticket, error)

// Handler serves GET <PathPrefix><id>?exp=…&sig=… with the job's verified
// result. A bad, tampered or expired URL is 403; a job without a result, or
// whose result is gone, is 404; unavailable infrastructure (the store, the
// job database, the keeper, refused credentials: claimcheck.Classify's
// FailureUnavailable) is 503. Responses
// never echo the URL, the key or the payload in an error.
func Handler(s *Signer, open Opener, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		id, err := s.Verify(r.URL.Path, r.URL.Query())
		if err != nil {
			logger.Info("result URL refused", "reason", err.Error())
			http.Error(w, "forbidden: invalid or expired URL", http.StatusForbidden)
			return
		}
		body, t, err := open(r.Context(), id)
		if err != nil {
			logger.Warn("result unavailable", "job", id, "reason", claimcheck.Reason(err))
			// Unavailable infrastructure (claimcheck.Classify: the store,
			// the database, the keeper, refused credentials) may pass;
			// anything else will not.
			if claimcheck.Classify(err) != claimcheck.FailureUnavailable {
				http.Error(w, "not found", http.StatusNotFound)
				return
			}
			http.Error(w, "result temporarily unavailable", http.StatusServiceUnavailable)
			return
		}
		defer body.Close()
		if t.ContentType != "" {
			w.Header().Set("Content-Type", t.ContentType)
		}
		w.Header().Set("Content-Length", strconv.FormatInt(t.Size, 10))
		w.Header().Set("Cache-Control", "private, no-store")
		if r.Method == http.MethodHead {
			return
		}
		if _, err := io.Copy(w, body); err != nil {
			logger.Warn("result transfer failed", "job", id, "ticket", t)
		}
	})
}
