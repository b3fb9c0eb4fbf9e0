package image_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/service/image"
)

const agentA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
const agentB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

func testSpec() airlock.ImageSpec {
	return airlock.ImageSpec{
		Name:     "t",
		Suite:    "bookworm",
		Packages: []string{"python3", "bash", "sqlite3"},
		Env:      map[string]string{"LANG": "C.UTF-8", "A": "1"},
	}
}

func TestHashStable(t *testing.T) {
	s := testSpec()
	if a, b := image.Hash(s, agentA), image.Hash(testSpec(), agentA); a != b {
		t.Fatalf("same spec, different hashes %s %s", a, b)
	}
	if len(image.Hash(s, agentA)) != 64 || len(image.StageHash(s)) != 64 {
		t.Fatalf("hash is not hex sha256: %q", image.Hash(s, agentA))
	}
	if got := image.Short(image.Hash(s, agentA)); len(got) != image.ShortLen {
		t.Fatalf("Short = %q", got)
	}
}

func TestHashOrderInsensitive(t *testing.T) {
	s := testSpec()
	r := testSpec()
	slices.Reverse(r.Packages)
	r.Packages = append(r.Packages, "bash") // duplicates do not count
	r.Env = maps.Clone(s.Env)
	if image.Hash(s, agentA) != image.Hash(r, agentA) || image.StageHash(s) != image.StageHash(r) {
		t.Fatalf("package order changed the hash:\n%s\n%s", image.Canonical(s), image.Canonical(r))
	}
}

func TestHashChanges(t *testing.T) {
	base := testSpec()
	tests := []struct {
		name       string
		edit       func(*airlock.ImageSpec)
		agent      string
		stageMoves bool
	}{
		{"agent", func(*airlock.ImageSpec) {}, agentB, false},
		{"package added", func(s *airlock.ImageSpec) { s.Packages = append(s.Packages, "nodejs") }, agentA, true},
		{"package removed", func(s *airlock.ImageSpec) { s.Packages = s.Packages[1:] }, agentA, true},
		{"suite", func(s *airlock.ImageSpec) { s.Suite = "trixie" }, agentA, true},
		{"env value", func(s *airlock.ImageSpec) { s.Env["A"] = "2" }, agentA, true},
		{"env added", func(s *airlock.ImageSpec) { s.Env["B"] = "" }, agentA, true},
		{"name", func(s *airlock.ImageSpec) { s.Name = "u" }, agentA, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSpec()
			tt.edit(&s)
			if image.Hash(s, tt.agent) == image.Hash(base, agentA) {
				t.Errorf("image hash did not change")
			}
			if moved := image.StageHash(s) != image.StageHash(base); moved != tt.stageMoves {
				t.Errorf("stage hash changed = %v, want %v", moved, tt.stageMoves)
			}
		})
	}
}

func TestSpecs(t *testing.T) {
	if len(image.Specs()) != 2 {
		t.Fatalf("Specs() = %d specs", len(image.Specs()))
	}
	for _, s := range image.Specs() {
		if err := image.ValidateSpec(s); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
	ds, err := image.SpecByName("python-ds")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Env["MPLBACKEND"] != "Agg" {
		t.Errorf("python-ds MPLBACKEND = %q", ds.Env["MPLBACKEND"])
	}
	base, _ := image.SpecByName("base")
	for _, p := range base.Packages {
		if !slices.Contains(ds.Packages, p) {
			t.Errorf("python-ds lacks base package %s", p)
		}
	}
	// Specs returns copies.
	ds.Env["MPLBACKEND"] = "x"
	if again, _ := image.SpecByName("python-ds"); again.Env["MPLBACKEND"] != "Agg" {
		t.Error("SpecByName returned shared state")
	}
	_, err = image.SpecByName("nope")
	if airlock.ErrorCode(err) != airlock.EINVALID {
		t.Errorf("unknown spec: %v", err)
	}
}

func TestValidateSpec(t *testing.T) {
	bad := []func(*airlock.ImageSpec){
		func(s *airlock.ImageSpec) { s.Name = "" },
		func(s *airlock.ImageSpec) { s.Name = "../x" },
		func(s *airlock.ImageSpec) { s.Suite = "bookworm main" },
		func(s *airlock.ImageSpec) { s.Packages = nil },
		func(s *airlock.ImageSpec) { s.Packages = []string{"bash,evil"} },
		func(s *airlock.ImageSpec) { s.Packages = []string{"--foo"} },
		func(s *airlock.ImageSpec) { s.Env = map[string]string{"A=B": "x"} },
	}
	for i, edit := range bad {
		s := testSpec()
		edit(&s)
		if err := image.ValidateSpec(s); airlock.ErrorCode(err) != airlock.EINVALID {
			t.Errorf("case %d: ValidateSpec = %v, want EINVALID", i, err)
		}
	}
}

// The stage of base keeps the hash it had before specs could have a
// parent: machines that built it keep it. (A change to the recipe that
// bumps RecipeVersion changes it on purpose; update the constant then.)
func TestBaseStageHashUnchanged(t *testing.T) {
	const want = "4c4d41792f898de878f74c094f7c32a621d3084ec876de137aca455961cb32f8"
	if got := image.StageHash(spec(t, "base")); got != want {
		t.Errorf("StageHash(base) = %s, want %s", got, want)
	}
}

// A derived spec's stage hash covers its parent's stage hash and the
// derivation; its image hash follows its stage.
func TestDerivedHash(t *testing.T) {
	parent := testSpec()
	child := testSpec()
	child.Name, child.From = "child", parent.Name
	child.Packages = append(child.Packages, "jq")
	h := image.StageHashWith(child, parent)

	standalone := child
	standalone.From = ""
	if h == image.StageHashWith(standalone, parent) {
		t.Errorf("From does not change the stage hash")
	}
	moved := parent
	moved.Packages = append(slices.Clone(parent.Packages), "curl")
	if h == image.StageHashWith(child, moved) {
		t.Errorf("a change to the parent's packages left the child's stage hash alone")
	}
	envOnly := parent
	envOnly.Env = map[string]string{"A": "2"}
	if h == image.StageHashWith(child, envOnly) {
		t.Errorf("a change to the parent's stage (env) left the child's stage hash alone")
	}
	if h != image.StageHashWith(child, testSpec()) {
		t.Errorf("the same parent gave another stage hash")
	}
	// A parent that cannot be found or a cycle still hashes (and
	// ValidateSpec refuses the spec).
	if image.StageHashWith(child) == h {
		t.Errorf("a missing parent hashed as the real one")
	}
	loop := parent
	loop.From = child.Name
	_ = image.StageHashWith(child, loop, child) // ends

	// The shipped python-ds follows base; its image hash covers its stage.
	ds, base := spec(t, "python-ds"), spec(t, "base")
	if ds.From != "base" {
		t.Fatalf("python-ds From = %q, want base", ds.From)
	}
	if image.StageHash(ds) != image.StageHashWith(ds, base) {
		t.Errorf("StageHash(python-ds) does not use the shipped base")
	}
	base2 := base
	base2.Packages = append(slices.Clone(base.Packages), "jq")
	if image.StageHash(ds) == image.StageHashWith(ds, base2) {
		t.Errorf("a change to base left python-ds's stage hash alone")
	}
	if image.Hash(ds, agentA) == image.Hash(ds, agentB) {
		t.Errorf("the agent does not change python-ds's image hash")
	}
}

func TestValidateSpecParent(t *testing.T) {
	ds := func() airlock.ImageSpec {
		s, _ := image.SpecByName("python-ds")
		return s
	}
	if err := image.ValidateSpec(ds()); err != nil {
		t.Fatalf("python-ds: %v", err)
	}
	bad := map[string]struct {
		edit func(*airlock.ImageSpec)
		want string
	}{
		"unknown parent":  {func(s *airlock.ImageSpec) { s.From = "nope" }, "not a shipped image"},
		"bad parent name": {func(s *airlock.ImageSpec) { s.From = "../base" }, "must match"},
		"itself":          {func(s *airlock.ImageSpec) { s.From = s.Name }, "itself"},
		"other suite":     {func(s *airlock.ImageSpec) { s.Suite = "trixie" }, "suite"},
		"lacks a package of the parent": {func(s *airlock.ImageSpec) {
			s.Packages = slices.DeleteFunc(s.Packages, func(p string) bool { return p == "nodejs" })
		}, `"nodejs"`},
		// base -> python-ds -> base: a spec named base that starts from
		// python-ds, which starts from the shipped base.
		"cycle": {func(s *airlock.ImageSpec) {
			b, _ := image.SpecByName("base")
			*s = b
			s.From = "python-ds"
			s.Packages = ds().Packages
		}, "lead back"},
	}
	for name, tt := range bad {
		t.Run(name, func(t *testing.T) {
			s := ds()
			tt.edit(&s)
			err := image.ValidateSpec(s)
			if airlock.ErrorCode(err) != airlock.EINVALID || !strings.Contains(airlock.ErrorMessage(err), tt.want) {
				t.Errorf("ValidateSpec = %v, want EINVALID with %q", err, tt.want)
			}
		})
	}
}
