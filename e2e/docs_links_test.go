package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// The documentation's relative links: every one in README.md,
// BENCHMARKS.md and docs/*.md must name a file or directory of the
// repository, and a heading of it when it has an anchor (#...), as
// GitHub renders them. Links to other sites are not followed.

// mdLink matches an inline Markdown link or image: [text](target) with an
// optional title.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// codeSpan matches inline code, whose brackets are not links.
var codeSpan = regexp.MustCompile("`[^`\n]*`")

// docLink is one relative link of a Markdown file.
type docLink struct {
	file   string // the file it is in, relative to the root
	line   int
	target string // as written
}

// brokenLink is a link that points nowhere, and why.
type brokenLink struct {
	docLink
	why string
}

func (b brokenLink) String() string {
	return fmt.Sprintf("%s:%d: link %q: %s", b.file, b.line, b.target, b.why)
}

// relativeLinks returns the links of a Markdown text that stay in the
// repository, skipping fenced blocks and code spans.
func relativeLinks(file, text string) []docLink {
	var out []docLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			t := m[1]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			out = append(out, docLink{file: file, line: i + 1, target: t})
		}
	}
	return out
}

// headingSlugs returns the anchors GitHub gives the headings of a
// Markdown text: lower case, spaces to hyphens, punctuation dropped, and
// -1, -2 ... after repeats.
func headingSlugs(text string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		if title == "" || !strings.HasPrefix(line, strings.Repeat("#", len(line)-len(strings.TrimLeft(line, "#")))+" ") {
			continue
		}
		s := slug(title)
		if n := seen[s]; n > 0 {
			slugs[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			slugs[s] = true
		}
		seen[s]++
	}
	return slugs
}

// slug is GitHub's anchor of a heading's text.
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// checkLinks returns the links among links that point nowhere under root.
func checkLinks(root string, links []docLink) []brokenLink {
	var bad []brokenLink
	slugsOf := map[string]map[string]bool{}
	for _, l := range links {
		path, anchor, _ := strings.Cut(l.target, "#")
		target := l.file
		if path != "" {
			if strings.HasPrefix(path, "/") {
				bad = append(bad, brokenLink{l, "an absolute path; use one relative to the file"})
				continue
			}
			target = filepath.Join(filepath.Dir(l.file), path)
			if rel, err := filepath.Rel(root, filepath.Join(root, target)); err != nil || strings.HasPrefix(rel, "..") {
				bad = append(bad, brokenLink{l, "points outside the repository"})
				continue
			}
		}
		fi, err := os.Stat(filepath.Join(root, target))
		if err != nil {
			bad = append(bad, brokenLink{l, fmt.Sprintf("no file %s", target)})
			continue
		}
		if anchor == "" || fi.IsDir() || !strings.HasSuffix(target, ".md") {
			continue
		}
		slugs, ok := slugsOf[target]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, target))
			if err != nil {
				bad = append(bad, brokenLink{l, err.Error()})
				continue
			}
			slugs = headingSlugs(string(b))
			slugsOf[target] = slugs
		}
		if !slugs[anchor] {
			bad = append(bad, brokenLink{l, fmt.Sprintf("%s has no heading #%s", target, anchor)})
		}
	}
	return bad
}

// docFiles are the Markdown files whose links are checked, relative to
// root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md", "BENCHMARKS.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(more)
	for _, f := range more {
		rel, _ := filepath.Rel(root, f)
		files = append(files, rel)
	}
	return files
}

// TestDocsLinks fails for every relative link of the documentation that
// names a missing file or heading, each on a line of its own.
func TestDocsLinks(t *testing.T) {
	root := repoRoot(t)
	var links []docLink
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, relativeLinks(f, string(b))...)
	}
	if len(links) < 50 {
		t.Fatalf("found only %d relative links in the docs: the link parser is broken", len(links))
	}
	for _, b := range checkLinks(root, links) {
		t.Errorf("broken: %s", b)
	}
	t.Logf("%d relative links checked", len(links))
}

// TestDocsLinkChecker checks the checker on a tree of its own: it must
// find each kind of broken link and pass the good ones.
func TestDocsLinkChecker(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A page\n\n## Speed against a bare `runsc run`\n\n## Twice\n\n## Twice\n")
	write("README.md", strings.Join([]string{
		"[ok](docs/a.md) [ok](docs/a.md#a-page) [ok](docs/a.md#speed-against-a-bare-runsc-run)",
		"[ok](docs/a.md#twice-1) [ok](docs/) [ok](https://example.invalid/x) [ok](#here)",
		"`[not a link](nowhere.md)`",
		"```",
		"[not a link](nowhere.md)",
		"```",
		"[bad](docs/b.md) [bad](docs/a.md#nope) [bad](../outside.md) [bad](#nothere)",
		"## Here",
	}, "\n"))
	b, _ := os.ReadFile(filepath.Join(root, "README.md"))
	links := relativeLinks("README.md", string(b))
	bad := checkLinks(root, links)
	var got []string
	for _, x := range bad {
		got = append(got, x.target)
	}
	want := []string{"docs/b.md", "docs/a.md#nope", "../outside.md", "#nothere"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("broken links found: %q, want %q", got, want)
	}
	if len(links) != 10 {
		t.Errorf("found %d links, want 10 (none in code, none to other sites)", len(links))
	}
}
