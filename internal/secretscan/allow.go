package secretscan

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Allow is one allow-list entry: pattern findings in the files it names
// are reported as allowed with its reason instead of refusing. It never
// covers a host secret.
type Allow struct {
	// Path is a path.Match pattern of the path in the tree ("/usr/lib/
	// python3/dist-packages/*/tests/*.pem"); a pattern ending in "/**"
	// covers everything below the directory before it.
	Path string
	// Rules limits the entry to these rules; empty covers every pattern
	// rule.
	Rules []string
	// Reason says why these are no credentials; it is shown with every
	// finding the entry covers. Required.
	Reason string
}

func (a Allow) validate() error {
	if a.Reason == "" {
		return fmt.Errorf("secretscan: allow entry %q: no reason", a.Path)
	}
	if !strings.HasPrefix(a.Path, "/") {
		return fmt.Errorf("secretscan: allow entry %q: the path must be absolute in the tree", a.Path)
	}
	if _, err := path.Match(strings.TrimSuffix(a.Path, "/**"), "/"); err != nil {
		return fmt.Errorf("secretscan: allow entry %q: %w", a.Path, err)
	}
	if slices.Contains(a.Rules, RuleHostSecret) {
		return fmt.Errorf("secretscan: allow entry %q: host secrets cannot be allowed", a.Path)
	}
	return nil
}

func (a Allow) covers(f Finding) bool {
	if len(a.Rules) > 0 && !slices.Contains(a.Rules, f.Rule) {
		return false
	}
	if dir, ok := strings.CutSuffix(a.Path, "/**"); ok {
		if ok, _ := path.Match(dir, f.Where); ok {
			return true
		}
		for p := path.Dir(f.Where); p != "/" && p != "."; p = path.Dir(p) {
			if ok, _ := path.Match(dir, p); ok {
				return true
			}
		}
		return false
	}
	ok, _ := path.Match(a.Path, f.Where)
	return ok
}

// DefaultAllow is the allow-list of the stock images, each entry decided
// by scanning the built base and python-ds images (BENCHMARKS.md, "Secret
// scanning"): what Debian's packages ship that a rule matches but that is
// no credential of anyone's.
var DefaultAllow = []Allow{
	{
		// Package libgnutls30: eleven PEM private keys (RSA, DSA, EC,
		// GOST) in .rodata right after the string "gnutls_pk_self_test":
		// the fixed keys of the library's power-on self-tests of its
		// public-key algorithms, the same in every copy of the library
		// and published with its source.
		Path:   "/usr/lib/*-linux-gnu/libgnutls.so.30*",
		Rules:  []string{RulePrivateKey},
		Reason: "GnuTLS's built-in public-key self-test keys (gnutls_pk_self_test), public in its source",
	},
}
