package image

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ParseDeb822Sources returns, in file order, the URIs of the enabled
// "deb" entries of a deb822 apt sources file (sources.list.d/*.sources)
// whose Suites include suite.
func ParseDeb822Sources(r io.Reader, suite string) ([]string, error) {
	var uris []string
	stanza := map[string]string{}
	last := ""
	flush := func() {
		if hasField(stanza["types"], "deb") && hasField(stanza["suites"], suite) &&
			!strings.EqualFold(strings.TrimSpace(stanza["enabled"]), "no") {
			uris = append(uris, strings.Fields(stanza["uris"])...)
		}
		stanza = map[string]string{}
		last = ""
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
			// comment line; does not end the stanza
		case line[0] == ' ' || line[0] == '\t':
			if last != "" { // continuation of the previous field
				stanza[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("deb822 sources: line %q is not a field", line)
			}
			last = strings.ToLower(strings.TrimSpace(k))
			stanza[last] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return uris, nil
}

// ParseSourcesList returns, in file order, the URIs of the "deb" lines of
// a one-line-style apt sources file (sources.list, sources.list.d/*.list)
// whose suite is suite.
//
//	deb [ option=value ... ] uri suite [component ...]
func ParseSourcesList(r io.Reader, suite string) ([]string, error) {
	var uris []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if len(f) > 0 && strings.HasPrefix(f[0], "[") {
			// options: "[a=b c=d]" or "[ a=b ]", possibly several fields
			for len(f) > 0 {
				end := strings.HasSuffix(f[0], "]")
				f = f[1:]
				if end {
					break
				}
			}
		}
		if len(f) < 2 {
			continue
		}
		if f[1] == suite {
			uris = append(uris, f[0])
		}
	}
	return uris, sc.Err()
}

func hasField(list, want string) bool {
	for _, f := range strings.Fields(list) {
		if f == want {
			return true
		}
	}
	return false
}

// usableMirror reports whether debootstrap can fetch from uri.
func usableMirror(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return false
	}
	switch u.Scheme {
	case "http", "https", "ftp":
		return u.Host != ""
	case "file":
		return u.Path != ""
	}
	return false
}

// ErrNoMirror is returned when the host's apt configuration names no
// source for the suite.
var ErrNoMirror = errors.New("no Debian mirror found in the host's apt sources")

// HostMirror returns the first usable URI for suite in the apt sources
// under aptDir (normally /etc/apt): sources.list, then sources.list.d/*.list
// and *.sources in name order, as apt reads them.
func HostMirror(aptDir, suite string) (string, error) {
	files := []string{filepath.Join(aptDir, "sources.list")}
	more, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*"))
	sort.Strings(more)
	for _, m := range more {
		if strings.HasSuffix(m, ".list") || strings.HasSuffix(m, ".sources") {
			files = append(files, m)
		}
	}
	for _, name := range files {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		var uris []string
		if strings.HasSuffix(name, ".sources") {
			uris, err = ParseDeb822Sources(f, suite)
		} else {
			uris, err = ParseSourcesList(f, suite)
		}
		f.Close()
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		for _, u := range uris {
			if strings.HasPrefix(u, "mirror+file:") {
				u = firstMirror(strings.TrimPrefix(strings.TrimPrefix(u, "mirror+file:"), "//"))
			}
			if usableMirror(u) {
				return u, nil
			}
		}
	}
	return "", fmt.Errorf("%w for suite %q (looked in %s and %s); pass --mirror URL with the URL of a Debian mirror",
		ErrNoMirror, suite, filepath.Join(aptDir, "sources.list"), filepath.Join(aptDir, "sources.list.d"))
}

// firstMirror returns the first usable URL of an apt mirror list (the
// file a "mirror+file:" source names: one URL per line, optionally
// followed by tab-separated metadata), or "".
func firstMirror(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if f := strings.Fields(line); len(f) > 0 && usableMirror(f[0]) {
			return f[0]
		}
	}
	return ""
}
