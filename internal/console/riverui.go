package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"riverqueue.com/riverui"

	"github.com/claimcheck/claimcheck/pipeline"
)

// River UI, mounted at RiverUIPrefix on the pipeline's own River client
// (riverui.NewEndpoints works through River's driver, so it runs on the
// riversqlite driver as on PostgreSQL). Three things are claimcheck's:
//
//   - every answer of its API (/riverui/api/...) is rewritten before it
//     leaves: a job's "args" through pipeline.RedactArgs and its "metadata"
//     through pipeline.RedactMetadata, so River UI never shows a key, an
//     inline payload or a wrapped key;
//   - its retry action on a dead letter is pipeline.Replay, the one that
//     `claimcheck dead replay` and the dead-letter page use, so it refuses
//     a job whose payload is gone; on other jobs (River's "run now") it is
//     River's;
//   - its delete action is pipeline.Delete, which deletes the jobs'
//     claims-registry rows with them (River's would leave them behind);
//   - its queue list first gets the queues whose jobs wait for a worker
//     that never ran (pipeline.RegisterQueues), which River lists only
//     once a worker has run.
//
// Before it is mounted its API is asked for the job states, the queues and
// one job; if any answer fails, RiverUIPrefix serves a page naming the
// error instead, and claimcheck's own pages work as before.

// riverUIProbes are the API paths asked before River UI is mounted: the
// queries its first page makes.
var riverUIProbes = []string{"api/states", "api/queues", "api/jobs?limit=1&state=available"}

func (c *Console) newRiverUI(ctx context.Context) (h http.Handler, err error) {
	defer func() { // River UI panics on a database it has no driver for
		if v := recover(); v != nil {
			err = fmt.Errorf("console: River UI: %v", v)
			h = c.riverUIUnavailable(err)
		}
	}()
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints:                riverui.NewEndpoints(c.o.Pipeline.RiverClient(), nil),
		JobListHideArgsByDefault: true,
		Logger:                   c.o.Logger,
		Prefix:                   strings.TrimSuffix(RiverUIPrefix, "/"),
	})
	if err == nil {
		err = ui.Start(ctx)
	}
	if err != nil {
		err = fmt.Errorf("console: River UI: %w", err)
		return c.riverUIUnavailable(err), err
	}
	for _, p := range riverUIProbes {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, RiverUIPrefix+p, nil)
		req.Header.Set("Accept", "application/json")
		rec := newBuffered()
		ui.ServeHTTP(rec, req)
		if rec.status != http.StatusOK {
			err := fmt.Errorf("console: River UI cannot query this %s job database: GET %s%s: %d %s", c.o.Pipeline.Dialect(), RiverUIPrefix, p, rec.status, apiMessage(rec.body.Bytes()))
			return c.riverUIUnavailable(err), err
		}
	}
	return &riverUIHandler{c: c, ui: ui}, nil
}

// riverUIUnavailable serves the page that says River UI does not run here.
func (c *Console) riverUIUnavailable(err error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, RiverUIPrefix+"api/") {
			writeAPIError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		c.render(w, r, http.StatusServiceUnavailable, "riverui", page{Title: "River UI", Nav: "riverui", Error: err.Error(),
			Data: map[string]string{"Dialect": c.o.Pipeline.Dialect()}})
	})
}

type riverUIHandler struct {
	c  *Console
	ui http.Handler
}

func (h *riverUIHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	api, isAPI := strings.CutPrefix(r.URL.Path, RiverUIPrefix+"api/")
	switch {
	case !isAPI:
		h.ui.ServeHTTP(w, r) // the page and its assets: no job data
	case r.Method == http.MethodPost && api == "jobs/retry":
		h.retry(w, r)
	case r.Method == http.MethodPost && api == "jobs/delete":
		h.delete(w, r)
	default:
		if r.Method == http.MethodGet && api == "queues" {
			// River lists only queues a worker has run: add those whose
			// jobs wait for one (pipeline.RegisterQueues).
			if _, err := h.c.o.Pipeline.RegisterQueues(r.Context()); err != nil {
				h.c.o.Logger.Warn("console: River UI queues", "err", err)
			}
		}
		h.redacted(w, r)
	}
}

// redacted serves an API request with every job's args and metadata
// redacted. An answer that is not plain JSON is not passed on.
func (h *riverUIHandler) redacted(w http.ResponseWriter, r *http.Request) {
	r.Header.Del("Accept-Encoding") // the body must be readable to redact it
	rec := newBuffered()
	h.ui.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.header.Get("Content-Encoding") != "" {
		writeAPIError(w, http.StatusBadGateway, "console: River UI answered with an encoded body, which cannot be redacted")
		return
	}
	if len(body) > 0 && strings.Contains(rec.header.Get("Content-Type"), "json") {
		red, err := redactJSON(body)
		if err != nil {
			writeAPIError(w, http.StatusBadGateway, "console: River UI's answer is not JSON, so it cannot be redacted")
			return
		}
		body = red
	} else if len(body) > 0 {
		writeAPIError(w, http.StatusBadGateway, "console: River UI's API answered with "+rec.header.Get("Content-Type")+", not JSON")
		return
	}
	for k, v := range rec.header {
		if k == "Content-Length" {
			continue
		}
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.status)
	_, _ = w.Write(body)
}

// redactJSON rewrites every object's "args" (a job's encoded arguments, a
// string in River UI's answers) and "metadata" in a JSON document.
func redactJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	doc, err := redactValue(doc)
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

func redactValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			switch k {
			case "args":
				var raw []byte
				if s, ok := e.(string); ok {
					raw = []byte(s)
				} else {
					raw, _ = json.Marshal(e)
				}
				v[k] = string(pipeline.RedactArgs(raw))
			case "metadata":
				raw, _ := json.Marshal(e)
				var md any
				if err := json.Unmarshal(pipeline.RedactMetadata(raw), &md); err != nil {
					return nil, err
				}
				v[k] = md
			default:
				r, err := redactValue(e)
				if err != nil {
					return nil, err
				}
				v[k] = r
			}
		}
		return v, nil
	case []any:
		for i, e := range v {
			r, err := redactValue(e)
			if err != nil {
				return nil, err
			}
			v[i] = r
		}
		return v, nil
	default:
		return v, nil
	}
}

// idsRequest is the body of River UI's job actions: {"ids": ["1", ...]}
// (strings or numbers).
func readIDs(r *http.Request) ([]int64, error) {
	var req struct {
		IDs []json.RawMessage `json:"ids"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		return nil, fmt.Errorf("the body is not {\"ids\": [...]}: %v", err)
	}
	if len(req.IDs) == 0 || len(req.IDs) > 1000 {
		return nil, errors.New("give 1 to 1000 job ids")
	}
	ids := make([]int64, len(req.IDs))
	for i, raw := range req.IDs {
		id, err := pipeline.ParseJobID(strings.Trim(string(raw), `"`))
		if err != nil {
			return nil, errors.New("not a job id: " + strconv.Quote(truncate(string(raw), 24)))
		}
		ids[i] = id
	}
	return ids, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// retry is River UI's retry: dead letters through pipeline.Replay, which
// refuses one whose payload is gone; the other jobs (River's "run now" of
// a retryable or scheduled job) through River UI itself.
func (h *riverUIHandler) retry(w http.ResponseWriter, r *http.Request) {
	ids, err := readIDs(r)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	var others []int64
	var refused []string
	for _, id := range ids {
		j, err := h.c.o.Pipeline.Get(ctx, id)
		if err == nil && !j.Dead {
			others = append(others, id)
			continue
		}
		if err == nil {
			_, err = h.c.o.Pipeline.Replay(ctx, id)
		}
		if err != nil {
			why := ReplayRefusal(err)
			if why == "" {
				h.c.o.Logger.Error("console: River UI retry", "job", id, "err", err)
				writeAPIError(w, http.StatusInternalServerError, fmt.Sprintf("job %d: %v", id, err))
				return
			}
			refused = append(refused, fmt.Sprintf("job %d refused: %s", id, refusals[why]))
		}
	}
	if len(others) > 0 {
		strs := make([]string, len(others))
		for i, id := range others {
			strs[i] = strconv.FormatInt(id, 10)
		}
		body, _ := json.Marshal(map[string][]string{"ids": strs})
		req := r.Clone(ctx)
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rec := newBuffered()
		h.ui.ServeHTTP(rec, req)
		if rec.status != http.StatusOK {
			refused = append(refused, apiMessage(rec.body.Bytes()))
		}
	}
	if len(refused) > 0 {
		writeAPIError(w, http.StatusConflict, strings.Join(refused, "; "))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// delete is River UI's delete through pipeline.Delete.
func (h *riverUIHandler) delete(w http.ResponseWriter, r *http.Request) {
	ids, err := readIDs(r)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, err := h.c.o.Pipeline.Delete(r.Context(), ids...); err != nil {
		writeAPIError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// writeAPIError answers as River UI's API does: {"message": ...}.
func writeAPIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// apiMessage is the "message" of an API error body, or the body cut short.
func apiMessage(body []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		return e.Message
	}
	return truncate(strings.TrimSpace(string(body)), 200)
}

// buffered is an http.ResponseWriter that keeps the answer in memory, for
// answers that are redacted or inspected before they are sent.
type buffered struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newBuffered() *buffered { return &buffered{header: http.Header{}, status: http.StatusOK} }

func (b *buffered) Header() http.Header { return b.header }

func (b *buffered) WriteHeader(status int) { b.status = status }

func (b *buffered) Write(p []byte) (int, error) { return b.body.Write(p) }
