package image_test

import (
	"maps"
	"slices"
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
