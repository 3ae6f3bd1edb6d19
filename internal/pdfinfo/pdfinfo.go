// Package pdfinfo is the built-in "pdf-info" handler: real document work on
// a verified PDF payload (page count and metadata, through pdfcpu), with a
// JSON result.
package pdfinfo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/fault"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/validate"

	"github.com/claimcheck/claimcheck"
)

// Kind is the job kind the handler serves.
const Kind = "pdf-info"

// ContentType is the result's media type.
const ContentType = "application/json"

// Info is the JSON result for one document.
type Info struct {
	PageCount        int      `json:"page_count"`
	Version          string   `json:"pdf_version"`
	Title            string   `json:"title,omitempty"`
	Author           string   `json:"author,omitempty"`
	Subject          string   `json:"subject,omitempty"`
	Creator          string   `json:"creator,omitempty"`
	Producer         string   `json:"producer,omitempty"`
	CreationDate     string   `json:"creation_date,omitempty"`
	ModificationDate string   `json:"modification_date,omitempty"`
	Keywords         []string `json:"keywords,omitempty"`
	Encrypted        bool     `json:"encrypted"`
	Tagged           bool     `json:"tagged"`
	Bytes            int64    `json:"bytes"`
	SHA256           string   `json:"sha256"`
}

var disableConfigDir sync.Once

// Handler returns the pdf-info handler. A payload that is not a readable
// PDF is a permanent failure: retrying the same bytes cannot help.
func Handler() claimcheck.Handler {
	// pdfcpu would otherwise write a config dir under $HOME (what its
	// api.DisableConfigDir sets).
	disableConfigDir.Do(func() { model.ConfigPath = "disable" })
	return claimcheck.HandlerFunc(handle)
}

// pdfInfo is pdfcpu's api.PDFInfo with no page selection and no fonts, in
// the steps it takes (read, validate relaxed, watermarks, info), called
// through pdfcpu's core packages rather than its api package: the api
// package links pdfcpu's form filler and through it go-runewidth, whose
// init builds width tables on every start of the command (~35 ms).
func pdfInfo(rs io.ReadSeeker) (info *pdfcpu.PDFInfo, err error) {
	defer fault.Catch(&err)
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	conf.Cmd = model.LISTINFO
	ctx, err := pdfcpu.Read(rs, conf)
	if err != nil {
		return nil, err
	}
	if err := validate.XRefTable(ctx); err != nil {
		return nil, err
	}
	if err := pdfcpu.DetectWatermarks(ctx); err != nil {
		return nil, err
	}
	return pdfcpu.Info(ctx, "", nil, false)
}

func handle(ctx context.Context, job *claimcheck.Job) (*claimcheck.Result, error) {
	r, err := job.Payload.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	info, err := pdfInfo(r)
	if err != nil {
		// pdfcpu's message can quote bytes of the document: keep it out of
		// error records (docs/invariants.md, invariant 9).
		return nil, claimcheck.Permanent(errors.New("pdf-info: not a readable PDF"))
	}
	t := job.Payload.Ticket()
	out, err := json.Marshal(Info{
		PageCount: info.PageCount, Version: info.Version, Title: info.Title, Author: info.Author,
		Subject: info.Subject, Creator: info.Creator, Producer: info.Producer,
		CreationDate: info.CreationDate, ModificationDate: info.ModificationDate,
		Keywords: info.Keywords, Encrypted: info.Encrypted, Tagged: info.Tagged,
		Bytes: t.Size, SHA256: t.SHA256,
	})
	if err != nil {
		return nil, fmt.Errorf("pdf-info: encode result: %w", err)
	}
	return &claimcheck.Result{Body: bytes.NewReader(out), ContentType: ContentType}, nil
}
