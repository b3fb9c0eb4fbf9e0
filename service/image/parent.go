package image

import (
	"fmt"
	"slices"

	"github.com/airlockhq/airlock"
)

// A spec may name another spec whose stage it starts from (From): its
// stage is then "derived", a copy of the parent's stage with the packages
// the spec has beyond the parent's installed by apt-get (derive.go). The
// parents are the shipped specs only: no path lets an operator give an
// ImageSpec (the CLI and airlockd build shipped specs by name), so a spec
// that names anything else is refused, not looked up elsewhere.

// checkParent reports what is wrong with spec's parent, if it has one: it
// must be a shipped spec other than spec, of the same suite, whose
// packages spec lists too, and the chain of parents must not lead back
// to spec.
func checkParent(spec airlock.ImageSpec) error {
	if spec.From == "" {
		return nil
	}
	if !nameRE.MatchString(spec.From) {
		return fmt.Errorf("from %q must match %s", spec.From, nameRE)
	}
	if spec.From == spec.Name {
		return fmt.Errorf("from %q: a spec cannot start from itself", spec.From)
	}
	parent, ok := shippedSpec(spec.From)
	if !ok {
		return fmt.Errorf("from %q is not a shipped image (known: %v)", spec.From, Names())
	}
	if parent.Suite != spec.Suite {
		return fmt.Errorf("from %q: suite %q differs from the parent's %q", spec.From, spec.Suite, parent.Suite)
	}
	for _, p := range parent.Packages {
		if !slices.Contains(spec.Packages, p) {
			return fmt.Errorf("from %q: package %q of the parent is not in the spec's packages (a derived spec lists them all)", spec.From, p)
		}
	}
	seen := map[string]bool{spec.Name: true}
	for p := parent; ; {
		if seen[p.Name] {
			return fmt.Errorf("from %q: the parents lead back to %q", spec.From, p.Name)
		}
		seen[p.Name] = true
		if p.From == "" {
			return nil
		}
		next, ok := shippedSpec(p.From)
		if !ok {
			return fmt.Errorf("from %q: its parent %q is not a shipped image", p.Name, p.From)
		}
		p = next
	}
}

// parentSpec returns the shipped spec spec starts from (ValidateSpec has
// checked it).
func parentSpec(spec airlock.ImageSpec) (airlock.ImageSpec, error) {
	p, ok := shippedSpec(spec.From)
	if !ok {
		return airlock.ImageSpec{}, fmt.Errorf("image spec %q: from %q is not a shipped image", spec.Name, spec.From)
	}
	return p, nil
}

// extraPackages returns the packages of spec that its parent does not
// have: what a derived stage installs, sorted and without duplicates.
func extraPackages(spec, parent airlock.ImageSpec) []string {
	var out []string
	for _, p := range slices.Compact(slices.Sorted(slices.Values(spec.Packages))) {
		if !slices.Contains(parent.Packages, p) {
			out = append(out, p)
		}
	}
	return out
}
