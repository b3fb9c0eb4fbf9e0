package mountinfo

import (
	"bufio"
	"io"
	"os"
	"sort"
	"strings"
)

// Mount is one line of a mountinfo file: the fields this module uses.
type Mount struct {
	// Root is the path within the mounted file system that forms the
	// mount's root (an nsfs mount's is the namespace, "net:[4026532000]").
	Root string
	// Point is the mount point, relative to the process's root.
	Point string
}

// maxLine bounds one line; longer lines are an error.
const maxLine = 1 << 20

// Parse reads a mountinfo file. Lines with fewer than five fields are
// skipped; octal escapes (\040 for a space) in paths are decoded.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, Mount{Root: Unescape(fields[3]), Point: Unescape(fields[4])})
	}
	return out, sc.Err()
}

// Self parses /proc/self/mountinfo.
func Self() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Under returns the mount points of ms at or below dir, in table (mount)
// order.
func Under(ms []Mount, dir string) []string {
	var out []string
	for _, m := range ms {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	return out
}

// DeepestFirst sorts mount points so that one below another comes
// before it (longest first), the order to unmount them in.
func DeepestFirst(points []string) {
	sort.SliceStable(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
}

// Unescape decodes the octal escapes of a mountinfo path (\040 for a
// space, \011 tab, \012 newline, \134 backslash). A backslash not
// followed by three octal digits that fit a byte is kept as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if c, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// octal reads three octal digits as a byte.
func octal(d string) (byte, bool) {
	n := 0
	for i := 0; i < 3; i++ {
		if d[i] < '0' || d[i] > '7' {
			return 0, false
		}
		n = n*8 + int(d[i]-'0')
	}
	if n > 255 {
		return 0, false
	}
	return byte(n), true
}
