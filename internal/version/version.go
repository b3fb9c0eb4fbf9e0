// Package version is the version of this build of Airlock, stamped at
// link time by scripts/release.sh:
//
//	go build -ldflags "-X github.com/airlockhq/airlock/internal/version.Version=0.2.0" ./cmd/...
//
// It owns that string, its --version line and the airlock_build_info
// metric; it reads nothing else.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release's version; "dev" in a build that was not
// stamped.
var Version = "dev"

// Revision is the source revision the build was made from (the VCS
// stamp go build records), or "" if it recorded none.
func Revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// Line is what a command's --version prints: "NAME VERSION (go1.x, linux/amd64)".
func Line(name string) string {
	s := fmt.Sprintf("%s %s (%s, %s/%s", name, Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if r := Revision(); r != "" {
		s += ", " + r
	}
	return s + ")"
}

// Collector is the airlock_build_info gauge: always 1, with the version,
// the Go version and the revision as labels.
func Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "airlock_build_info",
		Help:        "Build of this airlockd: always 1; the labels say which (version, Go version, source revision).",
		ConstLabels: prometheus.Labels{"version": Version, "goversion": runtime.Version(), "revision": Revision()},
	})
	g.Set(1)
	return g
}

// IsFlag reports whether args (without the program's name) ask only for
// the version: "--version" or "-version".
func IsFlag(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version")
}
