package secretscan

import (
	"bytes"
	"fmt"
	"sort"
)

// trigger is one literal the matcher looks for: a rule's trigger or one
// encoding of a host secret.
type trigger struct {
	lit    []byte // lower case when fold
	str    string // lit as given, for the rule's check
	fold   bool
	rule   *rule  // nil for a host secret
	secret string // the host secret's name
}

// matcher finds every trigger in one pass over a window: a bitset of the
// triggers' first two bytes (ASCII case folded) says where to look
// closer, so most bytes cost a table lookup.
type matcher struct {
	pairs  [1 << 16 / 64]uint64
	index  []uint16    // pair -> 1 + its position in byPair, read on a bitset hit
	byPair [][]trigger // the triggers of each pair in use
	memory bool        // skip text-only rules everywhere
}

var lowerTab = func() (t [256]byte) {
	for i := range t {
		c := byte(i)
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		t[i] = c
	}
	return t
}()

func pairOf(a, b byte) uint16 { return uint16(lowerTab[a])<<8 | uint16(lowerTab[b]) }

func newMatcher(secrets []Secret, memory bool) *matcher {
	m := &matcher{index: make([]uint16, 1<<16), memory: memory}
	add := func(t trigger) {
		if len(t.lit) < 2 || len(m.byPair) >= 1<<16-1 {
			return
		}
		p := pairOf(t.lit[0], t.lit[1])
		m.pairs[p>>6] |= 1 << (p & 63)
		if m.index[p] == 0 {
			m.byPair = append(m.byPair, nil)
			m.index[p] = uint16(len(m.byPair))
		}
		k := m.index[p] - 1
		m.byPair[k] = append(m.byPair[k], t)
	}
	for _, r := range rules {
		if memory && r.textOnly {
			continue
		}
		for _, lit := range r.triggers {
			b := []byte(lit)
			if r.fold {
				b = bytes.ToLower(b)
			}
			add(trigger{lit: b, str: lit, fold: r.fold, rule: r})
		}
	}
	for _, s := range secrets {
		for _, e := range encodings(s.Value) {
			add(trigger{lit: e, secret: s.Name})
		}
	}
	return m
}

// hit is one match in a window: start and end are window offsets.
type hit struct {
	rule       string
	generic    bool
	at         int // the trigger's position (for the line number)
	start, end int
	excerpt    string
}

// scan reports the matches of triggers starting at w[from:to]; rules may
// look at all of w. Text-only rules run only when text is set.
func (m *matcher) scan(w []byte, from, to int, text bool, emit func(hit)) {
	to = min(to, len(w)-1)
	if from >= to {
		return
	}
	lw := w[from : to+1] // each position needs the byte after it
	prev := uint16(lowerTab[lw[0]])
	for j := 1; j < len(lw); j++ {
		cur := uint16(lowerTab[lw[j]])
		p := prev<<8 | cur
		prev = cur
		if m.pairs[p>>6]&(1<<(p&63)) == 0 {
			continue
		}
		m.at(w, from+j-1, p, text, emit)
	}
}

// at checks the triggers of pair p at w[i].
func (m *matcher) at(w []byte, i int, p uint16, text bool, emit func(hit)) {
	for _, t := range m.byPair[m.index[p]-1] {
		if len(w)-i < len(t.lit) {
			continue
		}
		cand := w[i : i+len(t.lit)]
		if t.fold {
			if !equalFold(cand, t.lit) {
				continue
			}
		} else if !bytes.Equal(cand, t.lit) {
			continue
		}
		if t.rule == nil {
			emit(hit{rule: RuleHostSecret, at: i, start: i, end: i + len(t.lit),
				excerpt: fmt.Sprintf("<%s> (%d bytes)", printable(t.secret), len(t.lit))})
			continue
		}
		if t.rule.textOnly && !text {
			continue
		}
		if mt, ok := t.rule.check(w, i, t.str); ok {
			emit(hit{rule: t.rule.name, generic: t.rule.textOnly, at: i, start: mt.start, end: mt.end, excerpt: mt.excerpt})
		}
	}
}

// equalFold compares a with lower-case b ignoring ASCII case.
func equalFold(a, lowerB []byte) bool {
	for i := range a {
		if lowerTab[a[i]] != lowerB[i] {
			return false
		}
	}
	return true
}

// tidy sorts the findings of one file and drops the redundant ones: a
// generic assignment overlapping a specific match (the specific one says
// more), a specific match inside another (a PEM block inside a
// service-account key), and repeats at one offset.
func tidy(fs []Finding) []Finding {
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Offset < fs[j].Offset })
	specific := func(f Finding) bool { return f.Rule != RuleGenericSecret && f.Rule != RuleHostSecret }
	out := fs[:0]
	for i, f := range fs {
		drop := false
		for j, g := range fs {
			if i == j {
				continue
			}
			overlap := f.Offset < g.end && g.Offset < f.end
			inside := g.Offset <= f.Offset && f.end <= g.end
			switch {
			case f.Rule == RuleGenericSecret && specific(g) && overlap:
				drop = true
			case specific(f) && specific(g) && inside && (g.Offset != f.Offset || g.end != f.end || j < i):
				drop = true
			case f.Rule == g.Rule && f.Offset == g.Offset && j < i:
				drop = true
			}
			if drop {
				break
			}
		}
		if !drop {
			out = append(out, f)
		}
	}
	// An excerpt shows parts of the match (a name, a label, a prefix):
	// where a host secret overlaps the match, it shows nothing.
	for i, f := range out {
		if f.Rule == RuleHostSecret {
			continue
		}
		for _, g := range out {
			if g.Rule == RuleHostSecret && f.Offset < g.end && g.Offset < f.end {
				out[i].Excerpt = mask("", int(f.end-f.Offset))
				break
			}
		}
	}
	return out
}
