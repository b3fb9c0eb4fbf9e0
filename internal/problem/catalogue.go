package problem

import (
	"regexp"
	"sort"
	"strings"
)

// An Entry is one problem type of the catalogue: the slug that names it
// (the last segment of its type URI), the HTTP status it is answered
// with, a title, and a sentence on what it means and what to do.
type Entry struct {
	Slug    string `json:"slug"`
	Status  int    `json:"status"`
	Title   string `json:"title"`
	Summary string `json:"summary"`
}

// Type is the entry's type URI, TypePrefix + slug.
func (e Entry) Type() string { return TypePrefix + e.Slug }

// Code is the error code of the entry's status (the deprecated code
// member of its problem documents).
func (e Entry) Code() string { return CodeFor(e.Status) }

var slugRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidSlug reports whether s is spelled as a slug: lower-case words of
// letters and digits joined by hyphens.
func ValidSlug(s string) bool { return slugRE.MatchString(s) }

var bySlug = func() map[string]Entry {
	m := make(map[string]Entry, len(entries))
	for _, e := range entries {
		m[e.Slug] = e
	}
	return m
}()

// Catalogue returns every entry, sorted by slug.
func Catalogue() []Entry {
	out := append([]Entry(nil), entries...)
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// Lookup returns the entry of a slug.
func Lookup(slug string) (Entry, bool) {
	e, ok := bySlug[slug]
	return e, ok
}

// Slug returns the slug of a problem type URI: the part after TypePrefix,
// or after LegacyTypePrefix (servers before API 1.1.0), or after the
// last "/problems/" of an absolute URL resolved from the relative
// reference. It returns "" for a type that is not Airlock's, such as
// "about:blank".
func Slug(typ string) string {
	for _, p := range []string{TypePrefix, LegacyTypePrefix} {
		if s, ok := strings.CutPrefix(typ, p); ok {
			return s
		}
	}
	if i := strings.LastIndex(typ, TypePrefix); i > 0 && strings.Contains(typ[:i], "://") {
		return typ[i+len(TypePrefix):]
	}
	return ""
}
