package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (see go doc test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
	Output  string
}

type key struct{ pkg, test string }

type timing struct {
	pkg, test string
	elapsed   float64
	action    string
}

// report keeps each running test's output until it ends: printed if it
// failed, dropped otherwise, as plain go test does.
type report struct {
	w       io.Writer
	pending map[key][]string
	tests   []timing
	pkgs    []timing
	counts  map[string]int // pass, fail, skip of tests
}

func newReport(w io.Writer) *report {
	return &report{w: w, pending: map[key][]string{}, counts: map[string]int{}}
}

func (r *report) line(b []byte) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil || e.Action == "" {
		fmt.Fprintf(r.w, "%s\n", b)
		return
	}
	k := key{e.Package, e.Test}
	switch e.Action {
	case "build-output":
		fmt.Fprint(r.w, e.Output)
	case "output":
		if e.Test == "" {
			// The package's own lines: ok, FAIL, coverage, a panic
			// outside any test. "=== RUN"-style framing does not appear
			// here.
			// here. A plain go test leaves out a passing package's PASS.
			if e.Output != "PASS\n" {
				fmt.Fprint(r.w, e.Output)
			}
			return
		}
		r.pending[k] = append(r.pending[k], e.Output)
	case "pass", "fail", "skip":
		if e.Test == "" {
			r.pkgs = append(r.pkgs, timing{pkg: e.Package, elapsed: e.Elapsed, action: e.Action})
			return
		}
		r.counts[e.Action]++
		r.tests = append(r.tests, timing{pkg: e.Package, test: e.Test, elapsed: e.Elapsed, action: e.Action})
		if e.Action == "fail" {
			for _, l := range r.pending[k] {
				fmt.Fprint(r.w, l)
			}
		}
		delete(r.pending, k)
	}
}

// summary prints the counts and the slowest packages and top-level
// tests (a subtest's time is inside its parent's). Tests still pending
// (a timeout or a crash ended the binary) have their output printed.
func (r *report) summary(top int) {
	var left []key
	for k := range r.pending {
		left = append(left, k)
	}
	sort.Slice(left, func(i, j int) bool {
		if left[i].pkg != left[j].pkg {
			return left[i].pkg < left[j].pkg
		}
		return left[i].test < left[j].test
	})
	for _, k := range left {
		if strings.Contains(k.test, "/") {
			continue // in the parent's output below
		}
		fmt.Fprintf(r.w, "--- UNFINISHED: %s %s\n", k.pkg, k.test)
		for _, kk := range left {
			if kk.pkg == k.pkg && (kk.test == k.test || strings.HasPrefix(kk.test, k.test+"/")) {
				fmt.Fprint(r.w, strings.Join(r.pending[kk], ""))
			}
		}
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "\n==> slowest packages (of %d)\n", len(r.pkgs))
	pkgs := append([]timing(nil), r.pkgs...)
	sort.SliceStable(pkgs, func(i, j int) bool { return pkgs[i].elapsed > pkgs[j].elapsed })
	for _, p := range pkgs[:min(top, len(pkgs))] {
		fmt.Fprintf(&buf, "%8.1f s  %-4s %s\n", p.elapsed, p.action, p.pkg)
	}
	var tops []timing
	for _, t := range r.tests {
		if !strings.Contains(t.test, "/") {
			tops = append(tops, t)
		}
	}
	sort.SliceStable(tops, func(i, j int) bool { return tops[i].elapsed > tops[j].elapsed })
	fmt.Fprintf(&buf, "\n==> slowest tests (of %d top-level tests; %d passed, %d failed, %d skipped, subtests included)\n",
		len(tops), r.counts["pass"], r.counts["fail"], r.counts["skip"])
	for _, t := range tops[:min(top, len(tops))] {
		fmt.Fprintf(&buf, "%8.1f s  %-4s %s %s\n", t.elapsed, t.action, short(t.pkg), t.test)
	}
	r.w.Write(buf.Bytes())
}

// short drops the module's path from a package's.
func short(pkg string) string {
	const module = "github.com/airlockhq/airlock"
	if pkg == module {
		return "."
	}
	if s, ok := strings.CutPrefix(pkg, module+"/"); ok {
		return s
	}
	return pkg
}
