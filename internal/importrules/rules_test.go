package importrules_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/airlockhq/airlock"

// A rule forbids packages under From to import packages under any of To.
// Paths are relative to the module; "." is the domain package at the root.
type rule struct {
	From   string
	To     []string
	Reason string
}

// The groups, from the outside in: cmd (mains) and node (the one
// assembly) may import anything; front ends (api) call services; services
// speak the domain's interfaces; backends, stores and blobs implement
// them; the in-sandbox agent and its protocol stand alone.
var rules = []rule{
	{".", []string{"agent", "api", "backend", "blob", "client", "cmd", "fleet", "internal", "node", "service", "store"},
		"the domain imports no implementation"},
	{"backend", []string{"api", "blob", "client", "cmd", "fleet", "node", "service", "store"},
		"a backend knows the domain, the agent's protocol and internal helpers only"},
	{"store", []string{"agent", "api", "backend", "blob", "client", "cmd", "fleet", "node", "service"},
		"a store knows the domain only"},
	{"blob", []string{"agent", "api", "backend", "client", "cmd", "fleet", "node", "service", "store"},
		"a blob store knows the domain only"},
	{"service", []string{"api", "backend", "blob", "client", "cmd", "fleet", "node", "store"},
		"services work on the domain's interfaces, never on a concrete backend, store or front end"},
	{"api", []string{"backend", "blob", "cmd", "fleet", "node", "store"},
		"front ends call services through the domain, never a backend or a store"},
	{"fleet", []string{"api", "backend", "blob", "cmd", "node", "store"},
		"the fleet layer routes requests; it does not reach into a node"},
	{"agent", []string{"api", "backend", "blob", "client", "cmd", "fleet", "node", "service", "store"},
		"the agent runs inside the sandbox and carries nothing of the host"},
	{"client", []string{"agent", "api", "backend", "blob", "cmd", "fleet", "node", "service", "store"},
		"the Go client is for users: the domain's types and nothing else"},
}

// exempt names imports that break a rule today and are being removed;
// each entry must still exist (the test fails when one is gone, so the
// list only shrinks).
var exempt = map[string]string{}

type pkg struct {
	ImportPath string
	Imports    []string
}

func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// rel turns an import path of this module into a path relative to it
// ("." for the root); ok is false for other modules.
func rel(p string) (string, bool) {
	if p == module {
		return ".", true
	}
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r, true
	}
	return "", false
}

func under(p, dir string) bool {
	if dir == "." {
		return p == "."
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// violations lists "from -> to: reason" for every import that breaks a
// rule.
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			for _, r := range rules {
				if !under(from, r.From) {
					continue
				}
				for _, bad := range r.To {
					// A group may import its own subpackages
					// (backend/microvm -> backend/microvm/qemu).
					if under(to, bad) && !under(to, r.From) {
						out = append(out, from+" -> "+to+": "+r.Reason)
					}
				}
			}
		}
	}
	return out
}

func TestImportRules(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range violations(list(t)) {
		edge, _, _ := strings.Cut(v, ":")
		if _, ok := exempt[edge]; ok {
			seen[edge] = true
			continue
		}
		t.Errorf("import rule broken: %s", v)
	}
	for edge := range exempt {
		if !seen[edge] {
			t.Errorf("exempt import %q no longer exists: remove it from the exempt list", edge)
		}
	}
}

// TestRulesCatchAViolation makes sure the check itself can fail: a
// backend importing a front end, and the domain importing a backend.
func TestRulesCatchAViolation(t *testing.T) {
	fake := []pkg{
		{ImportPath: module + "/backend/gvisor", Imports: []string{module + "/api/rest", module + "/backend/gvisor/internal/x"}},
		{ImportPath: module, Imports: []string{module + "/backend/gvisor"}},
		{ImportPath: module + "/api/rest", Imports: []string{module, "net/http"}},
	}
	got := violations(fake)
	if len(got) != 2 || !strings.HasPrefix(got[0], "backend/gvisor -> api/rest") || !strings.HasPrefix(got[1], ". -> backend/gvisor") {
		t.Fatalf("violations = %q, want the backend's and the domain's import", got)
	}
}

// Every top-level folder of the module belongs to a group the rules know
// (or is a main, a test or tooling), so a new one is a decision.
func TestTopLevelGroups(t *testing.T) {
	known := map[string]bool{"agent": true, "api": true, "backend": true, "blob": true, "client": true,
		"cmd": true, "fleet": true, "internal": true, "node": true, "service": true, "store": true, "e2e": true, "deploy": true}
	for _, p := range list(t) {
		r, _ := rel(p.ImportPath)
		if r == "." {
			continue
		}
		top, _, _ := strings.Cut(r, "/")
		if !known[top] {
			t.Errorf("package %s is in top-level folder %q, which no import rule covers", r, path.Clean(top))
		}
	}
}
