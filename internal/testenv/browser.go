package testenv

// Browser tests: headless Chromium driven by chromedp, with full-page
// screenshots kept as the test's artifacts.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ScreenshotDir is $CLAIMCHECK_SCREENSHOT_DIR/<test name>, or the test's
// artifact directory (kept with go test -artifacts, see -outputdir).
func ScreenshotDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("CLAIMCHECK_SCREENSHOT_DIR"); d != "" {
		d = filepath.Join(d, t.Name())
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.ArtifactDir()
}

// NewBrowser starts headless Chromium with a fresh profile; it is stopped
// when t ends.
func NewBrowser(t *testing.T) context.Context {
	t.Helper()
	chromium := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0], chromedp.DefaultExecAllocatorOptions[:]...)
	opts = append(opts, chromedp.ExecPath(chromium), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1500, 1000))
	for _, f := range ChromiumFlags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // start it now: a start-up failure is named as such
		t.Fatalf("start %s: %v", chromium, err)
	}
	return ctx
}

// Visit loads url in the browser, then does act (e.g. waits for an
// element), saves a full-page screenshot as name.png and returns the
// page's HTML.
func Visit(t *testing.T, ctx context.Context, dir, name, url string, act ...chromedp.Action[chromedp.Void]) string {
	t.Helper()
	return Do(t, ctx, dir, name, append([]chromedp.Action[chromedp.Void]{chromedp.Navigate(url)}, act...)...)
}

// Do runs actions on the current page, then saves a full-page screenshot
// as name.png and returns the page's HTML.
func Do(t *testing.T, browser context.Context, dir, name string, actions ...chromedp.Action[chromedp.Void]) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 3*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		ctx, cancel := context.WithTimeout(browser, time.Minute)
		defer cancel()
		if png, perr := chromedp.Run(ctx, chromedp.FullScreenshot(100)); perr == nil { // what the page showed instead
			_ = os.WriteFile(filepath.Join(dir, name+"-failed.png"), png, 0o644)
		}
		t.Fatalf("%s: %v (the page as it was: %s-failed.png)", name, err, name)
	}
	html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatalf("%s: read the page: %v", name, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("%s: screenshot: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	return html
}

// TextIncludes waits until the page's visible text holds s.
func TextIncludes(s string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](fmt.Sprintf("document.body && document.body.innerText.includes(%q)", s), chromedp.WithPollingInterval(200*time.Millisecond))
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := poll(ctx, t)
		return chromedp.Void{}, err
	}
}

// Text is the visible text of the element sel.
func Text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}
