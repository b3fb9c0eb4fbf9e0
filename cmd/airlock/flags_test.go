package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		args     []string
		wantPos  []string
		wantDir  string
		wantBool bool
	}{
		{[]string{"acme"}, []string{"acme"}, "def", false},
		{[]string{"acme", "--state-dir", "/x"}, []string{"acme"}, "/x", false},
		{[]string{"--state-dir=/x", "acme"}, []string{"acme"}, "/x", false},
		{[]string{"a", "-v", "b", "--state-dir", "/y", "c"}, []string{"a", "b", "c"}, "/y", true},
		{[]string{"--", "-dash", "--state-dir"}, []string{"-dash", "--state-dir"}, "def", false},
		{[]string{"a", "--", "-v"}, []string{"a", "-v"}, "def", false},
		{[]string{"-"}, []string{"-"}, "def", false},
		{nil, nil, "def", false},
	}
	for _, tt := range tests {
		fs := newFlagSet("test", "usage\n", os.Stderr)
		dir := fs.String("state-dir", "def", "")
		v := fs.Bool("v", false, "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if !slices.Equal(pos, tt.wantPos) || *dir != tt.wantDir || *v != tt.wantBool {
			t.Errorf("%q: pos %q dir %q v %v; want %q %q %v", tt.args, pos, *dir, *v, tt.wantPos, tt.wantDir, tt.wantBool)
		}
	}
}

func TestServerFlagDefaults(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(envStateDir, dir)
	t.Setenv(envURL, "")
	t.Setenv(envAPIKey, "")

	var s serverFlags
	if got := s.serverURL(); got != "http://127.0.0.1:8080" {
		t.Errorf("default URL = %q", got)
	}
	if got := s.apiKey(); got != "" {
		t.Errorf("no key anywhere: got %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "default.key"), []byte("alk_fromfile\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := s.apiKey(); got != "alk_fromfile" {
		t.Errorf("key from file = %q", got)
	}
	t.Setenv(envAPIKey, "alk_fromenv")
	t.Setenv(envURL, "http://localhost:9")
	if got := s.apiKey(); got != "alk_fromenv" {
		t.Errorf("key from env = %q", got)
	}
	if got := s.serverURL(); got != "http://localhost:9" {
		t.Errorf("URL from env = %q", got)
	}
	s = serverFlags{url: "http://[::1]:1", key: "alk_flag"}
	if s.apiKey() != "alk_flag" || s.serverURL() != "http://[::1]:1" {
		t.Errorf("flags do not win: %q %q", s.apiKey(), s.serverURL())
	}
}

func TestNewID(t *testing.T) {
	a, b := newID(), newID()
	if len(a) != 26 || a == b {
		t.Errorf("newID() = %q, %q", a, b)
	}
}
