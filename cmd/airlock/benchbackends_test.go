package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchBackendsUsage(t *testing.T) {
	cliEnv(t)
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--requests", "0"}, "--requests"},
		{[]string{"--warmup", "-1"}, "--warmup"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		_, errs, code := runCLI(t, runBenchBackends, "", tt.args...)
		if code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("%v: exit %d %q, want 2 and %q", tt.args, code, errs, tt.msg)
		}
	}
}

func TestLookPathIn(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "usr", "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "usr", "bin", "python3"), nil, 0o755)
	if p, err := lookPathIn(root, "python3"); err != nil || p != "/usr/bin/python3" {
		t.Errorf("python3: %q %v", p, err)
	}
	if p, err := lookPathIn(root, "/bin/true"); err != nil || p != "/bin/true" {
		t.Errorf("/bin/true: %q %v", p, err)
	}
	if _, err := lookPathIn(root, "nothere"); err == nil {
		t.Errorf("a missing program was found")
	}
}

func TestMeminfoField(t *testing.T) {
	text := "MemTotal:         503800 kB\nMemFree:  1 kB\nMemAvailable:     400000 kB\nVmRSS:\t  266000 kB\nBad: 12 MB\nWorse: x kB\n"
	for _, tt := range []struct {
		name string
		want int64
		ok   bool
	}{
		{"MemTotal", 503800 << 10, true}, {"MemAvailable", 400000 << 10, true}, {"VmRSS", 266000 << 10, true},
		{"Mem", 0, false}, {"Bad", 0, false}, {"Worse", 0, false}, {"Missing", 0, false},
	} {
		if got, ok := meminfoField(text, tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("%s: %d %v, want %d %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if m := median([]int64{5, 1, 3, 2}); m != 2 {
		t.Errorf("median of 1,2,3,5: %d, want the lower middle 2", m)
	}
}
