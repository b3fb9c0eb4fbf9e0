package image

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/airlockhq/airlock"
)

// Suite is the Debian release the shipped images are built from.
const Suite = "bookworm"

// basePackages is what "base" installs on top of debootstrap's minbase.
// debootstrap resolves their Depends (not Recommends), so anything a
// program only recommends but needs in practice is listed here.
var basePackages = []string{
	"bash",
	"ca-certificates", // TLS roots for Python, Node and curl-like code
	"nodejs",
	"python3",
	"sqlite3",
	"tzdata", // zoneinfo for Python's zoneinfo and Node's Intl
}

// baseEnv is set for every process of every shipped image.
var baseEnv = map[string]string{
	"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"LANG": "C.UTF-8",
}

// Specs returns the shipped image specs: "base" and "python-ds". Each call
// returns fresh values the caller may modify.
func Specs() []airlock.ImageSpec {
	base := airlock.ImageSpec{
		Name:     "base",
		Suite:    Suite,
		Packages: slices.Clone(basePackages),
		Env:      maps.Clone(baseEnv),
	}

	ds := airlock.ImageSpec{
		Name:  "python-ds",
		Suite: Suite,
		// Its stage is a copy of base's with the four packages below
		// installed by apt-get, not a debootstrap of its own.
		From: "base",
		Packages: append(slices.Clone(basePackages),
			"python3-numpy",
			"python3-pandas",
			"python3-matplotlib",
			// matplotlib depends on it already; listed because text in a
			// plot renders only with a font present.
			"fonts-dejavu-core",
		),
		Env: maps.Clone(baseEnv),
	}
	// No display in a sandbox: the builder also writes /etc/matplotlibrc
	// with "backend: Agg" when python3-matplotlib is in the spec.
	ds.Env["MPLBACKEND"] = "Agg"
	// matplotlib keeps its font cache in $MPLCONFIGDIR, else in
	// $HOME/.cache, which is the workspace: its files would come back as
	// artifacts of every plotting run.
	ds.Env["MPLCONFIGDIR"] = "/tmp/matplotlib"

	return []airlock.ImageSpec{base, ds}
}

// SpecByName returns the shipped spec called name, or an EINVALID
// "unknown-image" problem.
func SpecByName(name string) (airlock.ImageSpec, error) {
	for _, s := range Specs() {
		if s.Name == name {
			return s, nil
		}
	}
	return airlock.ImageSpec{}, airlock.Problem(airlock.EINVALID, "unknown-image", "unknown image %q", name)
}

// Names returns the names of the shipped specs in order.
func Names() []string {
	var names []string
	for _, s := range Specs() {
		names = append(names, s.Name)
	}
	return names
}

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	suiteRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,62}$`)
	packageRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]{0,127}$`) // Debian policy 5.6.1
	envKeyRE  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ValidateSpec reports an EINVALID error if spec cannot be built: a bad
// name, suite, package name, environment variable or file, or a parent
// (From) that is not a shipped spec, has another suite, lists a package
// spec lacks, or leads back to spec.
func ValidateSpec(spec airlock.ImageSpec) error {
	bad := func(format string, args ...any) error {
		return airlock.Problem(airlock.EINVALID, "invalid-image-spec", "image spec %q: %s", spec.Name, fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(spec.Name) {
		return bad("name must match %s", nameRE)
	}
	if !suiteRE.MatchString(spec.Suite) {
		return bad("suite %q must match %s", spec.Suite, suiteRE)
	}
	if len(spec.Packages) == 0 {
		return bad("no packages")
	}
	for _, p := range spec.Packages {
		if !packageRE.MatchString(p) {
			return bad("package name %q is not a Debian package name", p)
		}
	}
	for k, v := range spec.Env {
		if !envKeyRE.MatchString(k) {
			return bad("env name %q must match %s", k, envKeyRE)
		}
		if strings.ContainsRune(v, 0) {
			return bad("env %s contains a NUL byte", k)
		}
	}
	if err := checkSpecFiles(spec.Files); err != nil {
		return bad("%v", err)
	}
	if err := checkParent(spec); err != nil {
		return bad("%v", err)
	}
	return nil
}
