package guard

import (
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/airlockhq/airlock"
)

// collector gathers the findings of one check: at most max, one per rule
// and place, each with an excerpt of the line of the code as sent.
type collector struct {
	mu       sync.Mutex
	src      string
	max      int
	findings []airlock.GuardFinding
	seen     map[string]bool
	starts   []int // where each line of src starts
	full     bool
	fullFlag atomic.Bool // full, read without the lock
	closed   bool        // the check was abandoned: later findings are dropped
}

func newCollector(src string, max int) *collector {
	return &collector{src: src, max: max, seen: map[string]bool{}, starts: lineStarts(src)}
}

// add records a finding of rule at line, col (1-based) of the code.
func (c *collector) add(rule string, line, col int, msg string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	// A parser may count lines its own way (JavaScript ends lines at \r
	// and U+2028 too): a place is kept inside the code.
	line = max(1, min(line, len(c.starts)))
	col = max(1, min(col, len(c.line(line))+1))
	key := rule + "\x00" + itoa(line) + ":" + itoa(col)
	if c.seen[key] {
		return
	}
	if len(c.findings) >= c.max {
		if !c.full {
			c.full = true
			c.fullFlag.Store(true)
			c.findings = append(c.findings, c.finding(RuleLimit, line, col, "more findings were dropped"))
		}
		return
	}
	c.seen[key] = true
	c.findings = append(c.findings, c.finding(rule, line, col, msg))
}

func (c *collector) finding(rule string, line, col int, msg string) airlock.GuardFinding {
	return airlock.GuardFinding{
		Rule: rule, Severity: Severity[rule], Line: line, Column: col,
		Excerpt: excerpt(c.line(line), col), Message: msg,
	}
}

// isFull reports whether the findings reached their bound.
func (c *collector) isFull() bool { return c.fullFlag.Load() }

// close drops every finding added from now on.
func (c *collector) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// result returns the findings in the order of the code.
func (c *collector) result() []airlock.GuardFinding {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]airlock.GuardFinding{}, c.findings...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Column < out[j].Column
	})
	return out
}

// line returns line n (1-based, within the code) of src.
func (c *collector) line(n int) string {
	start, end := c.starts[n-1], len(c.src)
	if n < len(c.starts) {
		end = c.starts[n] - 1
	}
	return c.src[start:end]
}

// excerpt returns at most airlock.MaxExcerptBytes of line around col,
// trimmed, valid UTF-8 with control characters replaced.
func excerpt(line string, col int) string {
	limit := airlock.MaxExcerptBytes
	if len(line) > limit {
		start := max(0, min(col-1-limit/4, len(line)-limit))
		line = line[start : start+limit]
	}
	line = strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(line, "?"))
	line = strings.TrimSpace(line)
	for len(line) > limit {
		_, n := utf8.DecodeLastRuneInString(line)
		line = line[:len(line)-n]
	}
	return line
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
