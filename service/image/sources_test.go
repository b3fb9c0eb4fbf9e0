package image_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/service/image"
)

const deb822 = `# a comment before the first stanza
Types: deb deb-src
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.example/debian-security
Suites: bookworm-security
Components: main

types: deb
uris: http://disabled.example/debian
suites: bookworm
enabled: no

Types: deb-src
URIs: http://src-only.example/debian
Suites: bookworm

Types: deb
URIs: http://a.example/debian
 http://b.example/debian
Suites:
 trixie
 bookworm
Components: main
`

func TestParseDeb822Sources(t *testing.T) {
	tests := []struct {
		suite string
		want  []string
	}{
		{"bookworm", []string{"http://mirror.example/debian", "http://a.example/debian", "http://b.example/debian"}},
		{"bookworm-security", []string{"http://security.example/debian-security"}},
		{"trixie", []string{"http://a.example/debian", "http://b.example/debian"}},
		{"sid", nil},
	}
	for _, tt := range tests {
		got, err := image.ParseDeb822Sources(strings.NewReader(deb822), tt.suite)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.suite, got, tt.want)
		}
	}
	if _, err := image.ParseDeb822Sources(strings.NewReader("Types deb\n"), "bookworm"); err == nil {
		t.Error("a line without a colon parsed")
	}
}

const oneLine = `# deb http://commented.example/debian bookworm main
deb http://mirror.example/debian bookworm main contrib
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://opts.example/debian bookworm main
deb [ arch=amd64 ] http://spaced.example/debian bookworm main # trailing comment
deb http://security.example/debian-security bookworm-security main
deb https://other.example/apt cloud-sdk-bookworm main

deb http://short.example/debian
`

func TestParseSourcesList(t *testing.T) {
	got, err := image.ParseSourcesList(strings.NewReader(oneLine), "bookworm")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://mirror.example/debian", "http://opts.example/debian", "http://spaced.example/debian"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestHostMirror(t *testing.T) {
	write := func(t *testing.T, dir, name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("deb822 only", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "sources.list.d/debian.sources", deb822)
		write(t, dir, "sources.list.d/other.list.disabled", "deb http://ignored.example/debian bookworm main\n")
		got, err := image.HostMirror(dir, "bookworm")
		if err != nil || got != "http://mirror.example/debian" {
			t.Fatalf("HostMirror = %q, %v", got, err)
		}
	})
	t.Run("sources.list first", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "sources.list", "deb cdrom:[Debian]/ bookworm main\ndeb http://list.example/debian bookworm main\n")
		write(t, dir, "sources.list.d/debian.sources", deb822)
		got, err := image.HostMirror(dir, "bookworm")
		if err != nil || got != "http://list.example/debian" {
			t.Fatalf("HostMirror = %q, %v", got, err)
		}
	})
	t.Run("mirror+file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "mirrors/debian.list", "# cloud mirrors\nhttp://cloud.example/debian\tpriority:1\nhttp://other.example/debian\n")
		write(t, dir, "sources.list.d/debian.sources",
			"Types: deb\nURIs: mirror+file://"+filepath.Join(dir, "mirrors/debian.list")+"\nSuites: bookworm\nComponents: main\n")
		got, err := image.HostMirror(dir, "bookworm")
		if err != nil || got != "http://cloud.example/debian" {
			t.Fatalf("HostMirror = %q, %v", got, err)
		}
	})
	t.Run("none", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "sources.list.d/debian.sources", deb822)
		_, err := image.HostMirror(dir, "sid")
		if !errors.Is(err, image.ErrNoMirror) || !strings.Contains(err.Error(), "--mirror") {
			t.Fatalf("HostMirror = %v, want ErrNoMirror mentioning --mirror", err)
		}
	})
}

func FuzzParseDeb822Sources(f *testing.F) {
	f.Add(deb822, "bookworm")
	f.Add("Types: deb\n URIs: x\n\n\n#\n", "")
	f.Fuzz(func(t *testing.T, in, suite string) {
		image.ParseDeb822Sources(strings.NewReader(in), suite)
	})
}

func FuzzParseSourcesList(f *testing.F) {
	f.Add(oneLine, "bookworm")
	f.Add("deb [ a=b\n", "bookworm")
	f.Fuzz(func(t *testing.T, in, suite string) {
		uris, _ := image.ParseSourcesList(strings.NewReader(in), suite)
		for _, u := range uris {
			if u == "" || strings.ContainsAny(u, " \t\n") {
				t.Fatalf("bad URI %q", u)
			}
		}
	})
}
