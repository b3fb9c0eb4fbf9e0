package broker

import (
	"errors"
	"path"
	"strings"
)

// checkPattern checks a path pattern: it starts with "/", its segments are
// path.Match patterns, and "**" may only be the last segment.
func checkPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("must start with /")
	}
	segs := strings.Split(p[1:], "/")
	for i, s := range segs {
		if s == "**" {
			if i != len(segs)-1 {
				return errors.New("** may only be the last segment")
			}
			continue
		}
		if strings.Contains(s, "**") {
			return errors.New("** must be a whole segment")
		}
		if _, err := path.Match(s, ""); err != nil {
			return err
		}
	}
	return nil
}

// matchPath reports whether the clean path p matches pattern.
func matchPath(pattern, p string) bool {
	ps := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	xs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range ps {
		if s == "**" {
			return true
		}
		if i >= len(xs) {
			return false
		}
		if ok, _ := path.Match(s, xs[i]); !ok {
			return false
		}
	}
	return len(xs) == len(ps)
}

// splitCall splits the path of a broker request into the scope and the
// path to call upstream, and refuses any path that is not in clean form
// (dot segments, doubled slashes, encoded slashes or backslashes): what
// is checked is exactly what is sent.
func splitCall(decoded, escaped string) (scope, rest string, err error) {
	if !strings.HasPrefix(decoded, "/") {
		return "", "", errors.New("the path must start with /<scope>/")
	}
	low := strings.ToLower(escaped)
	if strings.Contains(low, "%2f") || strings.Contains(low, "%5c") || strings.Contains(decoded, "\\") || strings.ContainsRune(decoded, 0) {
		return "", "", errors.New("encoded slashes and backslashes are not allowed in the path")
	}
	scope, rest, _ = strings.Cut(decoded[1:], "/")
	rest = "/" + rest
	clean := path.Clean(rest)
	if clean != rest && clean+"/" != rest {
		return "", "", errors.New("the path must be clean: no '.', '..' or empty segments")
	}
	if scope == "" {
		return "", "", errors.New("the path must start with /<scope>/")
	}
	return scope, rest, nil
}
