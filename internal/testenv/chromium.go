package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// EnvChromium names the variable holding the path of the Chromium binary
// browser tests drive (Debian's chromium package: /usr/bin/chromium).
const EnvChromium = "CLAIMCHECK_CHROMIUM"

// ChromiumFlags are the flags every browser test starts Chromium with,
// besides a fresh --user-data-dir: headless, no sandbox (tests run as
// root), and nothing that reaches the network by itself.
var ChromiumFlags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-quic", "no-first-run",
	"disable-background-networking", "disable-component-update", "disable-sync",
}

// Chromium returns the Chromium binary: $CLAIMCHECK_CHROMIUM, else
// chromium on PATH. When there is neither it skips t naming the variable
// and how to install it, or, when CI is set, fails t (.ci/run installs it).
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return Require(t, EnvChromium, "install Debian's chromium (apt-get install -y chromium) and set CLAIMCHECK_CHROMIUM=/usr/bin/chromium")
}
