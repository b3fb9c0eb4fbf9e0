package conformance

import (
	"os"
	"strings"
	"testing"
)

// The suite has at least 30 cases, each named once, each with the result
// it must give, each listed in the package documentation.
func TestCases(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	cases := Cases()
	if len(cases) < 30 {
		t.Errorf("%d cases, want at least 30", len(cases))
	}
	seen := map[string]bool{}
	groups := map[string]int{}
	for _, c := range cases {
		if seen[c.Group+"/"+c.Name] {
			t.Errorf("case %s/%s twice", c.Group, c.Name)
		}
		seen[c.Group+"/"+c.Name] = true
		groups[c.Group]++
		if c.Want == "" || c.Run == nil {
			t.Errorf("case %s has no expected result or no body", c.Name)
		}
		if !strings.Contains(string(doc), "//   - "+c.Name+":") && !strings.Contains(string(doc), "//   - "+c.Name+" (separate-kernel):") {
			t.Errorf("case %s is not in the package documentation", c.Name)
		}
		if c.SeparateKernel != strings.Contains(string(doc), "//   - "+c.Name+" (separate-kernel):") {
			t.Errorf("case %s: the documentation and the code disagree on whether it needs a separate kernel", c.Name)
		}
	}
	for _, g := range []string{Escape, Exhaustion, Leak, Files} {
		if groups[g] == 0 {
			t.Errorf("no case in group %s", g)
		}
	}
}

// The probe results parse, and only "label=result" lines count.
func TestProbes(t *testing.T) {
	got := probes("a=ok\nnoise line\nb=EPERM\nwith space=x\n=empty\nc=1=2\n")
	want := map[string]string{"a": "ok", "b": "EPERM", "c": "1=2"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if !strings.Contains(prelude(), `"mount"`) {
		t.Errorf("the prelude lacks the syscall table")
	}
}
