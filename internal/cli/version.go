package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionOptions are the options of version: it has no flags of its own.
type versionOptions struct{ g *globals }

// Validate has nothing to check: version has no flags of its own.
func (o *versionOptions) Validate() error { return nil }

// buildVersion is what version prints, from the binary's build information
// (runtime/debug.ReadBuildInfo): the main module's version ("(devel)" for a
// build from a clone), the VCS revision and time when the build recorded
// them (go build's default -buildvcs=auto in a git clone), and Go's version.
type buildVersion struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

func readBuildVersion() buildVersion {
	v := buildVersion{Module: "github.com/claimcheck/claimcheck", Version: "(unknown)", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Path != "" {
		v.Module, v.Version = bi.Main.Path, bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

func newVersion(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the command's module version and VCS revision",
		Long: `Print the module version, the VCS revision and commit time the binary was built
from (when the build recorded them: go build in a git clone does unless
-buildvcs=false), and the Go version. It opens nothing.`,
		Args: exactArgs(0, "no arguments"),
		RunE: runE(&versionOptions{g: g}, nil),
	}
}

func (o *versionOptions) run(_ context.Context, s streams) error {
	v := readBuildVersion()
	if o.g.json {
		return printJSON(s.out, v)
	}
	rev := "revision unknown (built without VCS information)"
	if v.Revision != "" {
		rev = "revision " + v.Revision
		if v.Modified {
			rev += " (modified)"
		}
		if v.Time != "" {
			rev += ", " + v.Time
		}
	}
	_, err := fmt.Fprintf(s.out, "claimcheck %s, %s, %s\n", v.Version, rev, v.Go)
	return err
}
