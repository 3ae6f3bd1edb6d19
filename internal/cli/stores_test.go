package cli

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/claimcheck/claimcheck/internal/testenv"
)

// TestNamedStoresCLI (issue 16, must-show 3, on SQLite and PostgreSQL):
// two named stores, "eu" on SeaweedFS (CLAIMCHECK_TEST_S3_URL) and "us" a
// file store. submit --store-name puts each job's payload in its store; a
// worker given only --store eu=… works the eu jobs and never fetches the
// us ones (they stay available, no attempt spent, not dead); a worker
// given only --store us=… then completes them. sweep and doctor cover
// both stores.
func TestNamedStoresCLI(t *testing.T) {
	t.Parallel()
	raw := testenv.Require(t, "CLAIMCHECK_TEST_S3_URL", "scripts/seaweedfs.sh start && eval \"$(scripts/seaweedfs.sh env)\"")
	eachJobDatabase(t, func(t *testing.T, b *cliBundle, database []string) {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("prefix", "cli-regionpin-"+hex.EncodeToString(rnd[:])+"/") // this job database's own namespace
		u.RawQuery = q.Encode()
		eu := "eu=" + u.String()
		us := "us=file://" + filepath.Join(t.TempDir(), "us")
		both := slices.Concat(database, []string{"--store", eu, "--store", us, "--always-offload"})
		euOnly := slices.Concat(database, []string{"--store", eu})
		usOnly := slices.Concat(database, []string{"--store", us})

		submit := func(store, file string) jobJSON {
			t.Helper()
			return b.submit(slices.Concat(both, []string{"--kind", "docs", "--tenant", "acme", "--store-name", store, filepath.Join(corpusPath, file)})...)
		}
		euJob := submit("eu", "pixel.pdf")
		usJob := submit("us", "refcard-a4.pdf")
		r := b.run("", append(both, "submit", "--kind", "docs", "--tenant", "acme", "--store-name", "us", filepath.Join(corpusPath, "bash.pdf"))...)
		if r.code != 0 || !strings.Contains(r.stdout, "store=us") {
			t.Fatalf("submit --store-name us: exit %d, want the store named\n%s%s", r.code, r.stdout, r.stderr)
		}
		t.Logf("submit: %s", strings.TrimSpace(r.stdout))

		type listed struct {
			ID       int64  `json:"id"`
			State    string `json:"state"`
			Attempts int    `json:"attempts"`
			Dead     bool   `json:"dead"`
			Store    string `json:"store"`
		}
		list := func() map[int64]listed {
			t.Helper()
			var js []listed
			if err := json.Unmarshal([]byte(b.ok(append(both, "jobs", "--json")...)), &js); err != nil {
				t.Fatal(err)
			}
			m := map[int64]listed{}
			for _, j := range js {
				m[j.ID] = j
			}
			return m
		}
		if js := list(); js[euJob.ID].Store != "eu" || js[usJob.ID].Store != "us" || len(js) != 3 {
			t.Fatalf("jobs: %+v, want eu's job in store eu, us's two in us", js)
		}

		work := func(global []string) result {
			t.Helper()
			r := b.run("", append(global, "work", "--kind", "docs", "--until-empty", "--exec", "--", "sh", "-c", "wc -c")...)
			if r.code != 0 {
				t.Fatalf("work %v: exit %d\n%s%s", global, r.code, r.stdout, r.stderr)
			}
			return r
		}
		r = work(euOnly)
		t.Logf("eu worker: %s %s", strings.TrimSpace(r.stderr), strings.TrimSpace(r.stdout))
		if !strings.Contains(r.stdout, "attempts succeeded 1, failed 0; jobs dead 0") || !strings.Contains(r.stderr, "store eu only") {
			t.Fatalf("the eu worker did not work exactly eu's job:\n%s%s", r.stdout, r.stderr)
		}
		for id, j := range list() {
			switch {
			case id == euJob.ID && (j.State != "completed" || j.Attempts != 1):
				t.Fatalf("eu's job %d after the eu worker: %+v, want completed on attempt 1", id, j)
			case id != euJob.ID && (j.State != "available" || j.Attempts != 0 || j.Dead):
				t.Fatalf("us's job %d after the eu worker: %+v, want available, never fetched, not dead", id, j)
			}
		}
		for _, id := range []int64{euJob.ID, usJob.ID, usJob.ID + 1} {
			j := list()[id]
			t.Logf("after the eu worker: job %d store=%s state=%s attempts=%d dead=%v", id, j.Store, j.State, j.Attempts, j.Dead)
		}
		r = work(usOnly)
		t.Logf("us worker: %s %s", strings.TrimSpace(r.stderr), strings.TrimSpace(r.stdout))
		if !strings.Contains(r.stdout, "attempts succeeded 2, failed 0; jobs dead 0") {
			t.Fatalf("the us worker did not complete us's two jobs:\n%s%s", r.stdout, r.stderr)
		}
		for id, j := range list() {
			if j.State != "completed" || j.Attempts != 1 {
				t.Fatalf("job %d after both workers: %+v, want completed on attempt 1", id, j)
			}
		}
		if res := b.ok(append(both, "result", strconv.FormatInt(euJob.ID, 10))...); strings.TrimSpace(res) == "" {
			t.Fatal("no result for eu's job")
		}

		// sweep and doctor cover each store.
		out := b.ok(append(both, "sweep", "--dry-run")...)
		if !strings.Contains(out, "store eu (") || !strings.Contains(out, "store us (file://") {
			t.Fatalf("sweep did not cover both stores:\n%s", out)
		}
		var sw struct {
			Stores []struct {
				Store   string `json:"store"`
				Summary struct {
					Listed int `json:"listed"`
				} `json:"summary"`
			} `json:"stores"`
		}
		if err := json.Unmarshal([]byte(b.ok(append(both, "--json", "sweep", "--dry-run")...)), &sw); err != nil || len(sw.Stores) != 2 || sw.Stores[0].Store != "eu" || sw.Stores[1].Store != "us" {
			t.Fatalf("sweep --json: %+v (%v)", sw, err)
		}
		// The shared test bucket has no lifecycle rules, which doctor
		// rightly fails on eu (its lifecycle rows); every other check
		// passes on both stores.
		r = b.run("", append(both, "doctor")...)
		t.Logf("doctor (exit %d; eu's bucket is the shared test bucket, without lifecycle rules):\n%s", r.code, r.stdout)
		var doc struct {
			Checks []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"checks"`
		}
		if err := json.Unmarshal([]byte(b.run("", append(both, "--json", "doctor")...).stdout), &doc); err != nil {
			t.Fatal(err)
		}
		per := map[string]int{}
		for _, c := range doc.Checks {
			for _, st := range []string{"eu", "us"} {
				if strings.HasSuffix(c.Name, " [store "+st+"]") {
					per[st]++
				}
			}
			lifecycle := strings.HasPrefix(c.Name, "expiry ") || strings.HasPrefix(c.Name, "abort incomplete uploads ")
			if c.Status == "fail" && !(lifecycle && strings.HasSuffix(c.Name, "[store eu]")) {
				t.Errorf("doctor check %q: %s", c.Name, c.Status)
			}
			if (c.Name == "store [store eu]" || c.Name == "store [store us]") && c.Status != "pass" {
				t.Errorf("doctor check %q: %s, want pass", c.Name, c.Status)
			}
		}
		if per["eu"] < 5 || per["us"] < 5 {
			t.Fatalf("doctor checks per store: %v, want every check on both stores", per)
		}

		// A store the command lacks, and a broker worker of two stores,
		// are usage errors.
		r = b.run("", append(euOnly, "submit", "--kind", "docs", "--tenant", "acme", "--store-name", "us", filepath.Join(corpusPath, "pixel.pdf"))...)
		if r.code != 2 || !strings.Contains(r.stderr, `--store-name us: no such store`) || !strings.Contains(r.stderr, "--store us=URL") {
			t.Fatalf("submit --store-name of a store not configured: exit %d\n%s", r.code, r.stderr)
		}
		r = b.run("", append(both, "--broker", "amqp://guest:guest@127.0.0.1:1/?queue=x", "work", "--kind", "docs", "--until-empty", "--exec", "--", "true")...)
		if r.code != 2 || !strings.Contains(r.stderr, "one worker per store") {
			t.Fatalf("work --broker with two stores: exit %d\n%s", r.code, r.stderr)
		}
	})
}

// TestStoreFlag: --store takes URL or NAME=URL, repeatable; names are
// checked; CLAIMCHECK_STORE's whitespace-separated list is the default,
// which a --store replaces.
func TestStoreFlag(t *testing.T) {
	t.Parallel()
	g := &globals{}
	f := &storeFlag{g: g}
	f.setEnv(" eu=s3://paperwork-eu?region=eu-west-1\n us=file:///srv/us ")
	if g.storeErr != nil || len(g.stores) != 2 || g.store != "s3://paperwork-eu?region=eu-west-1" || g.storeName != "eu" {
		t.Fatalf("from the environment: %+v", g)
	}
	_ = f.Set("file:///srv/main")
	_ = f.Set("us=file:///srv/us")
	if g.storeErr != nil || len(g.stores) != 2 || g.store != "file:///srv/main" || g.storeName != "" || g.stores[1] != (storeSpec{"us", "file:///srv/us"}) {
		t.Fatalf("--store replacing the environment's: %+v", g)
	}
	if specs := g.storeSpecs("/data"); len(specs) != 2 || specs[0] != (storeSpec{"", "file:///srv/main"}) || specs[1].name != "us" {
		t.Fatalf("storeSpecs: %+v", specs)
	}
	for v, want := range map[string]string{
		"eu_west=file:///x": "store name",
		"EU=file:///x":      "store name",
		"eu=":               "give the store's URL",
		"":                  "give a URL",
	} {
		g := &globals{}
		_ = (&storeFlag{g: g}).Set(v)
		if g.storeErr == nil || !strings.Contains(g.storeErr.Error(), want) {
			t.Errorf("--store %q: %v, want an error saying %q", v, g.storeErr, want)
		}
	}
	for _, pair := range [][2]string{{"file:///a", "file:///b"}, {"eu=file:///a", "eu=file:///b"}, {"file:///a", "default=file:///b"}} {
		g := &globals{}
		f := &storeFlag{g: g}
		_ = f.Set(pair[0])
		_ = f.Set(pair[1])
		if g.storeErr == nil || g.validate() == nil {
			t.Errorf("--store %s --store %s: accepted", pair[0], pair[1])
		}
	}
	// No --store: the data directory's file store, the default store.
	g = &globals{}
	if specs := g.storeSpecs("/data"); len(specs) != 1 || specs[0] != (storeSpec{"", "file:///data/objects"}) {
		t.Fatalf("no --store: %+v", specs)
	}
}
