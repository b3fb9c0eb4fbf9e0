package agent

import (
	"bytes"
	"testing"

	"github.com/airlockhq/airlock/agent/protocol"
)

// FuzzParseRunnerLine feeds arbitrary lines, as a runner whose user code
// wrote to its result channel could, to the agent's parser: it never
// panics, and what it accepts encodes to a result the host accepts.
func FuzzParseRunnerLine(f *testing.F) {
	for _, s := range []string{`{"ready": true}`, `{"value": "42", "error": null, "outputs": [], "dropped": 0}`,
		`{"value": null, "error": {"name": "E", "value": "v", "traceback": "t"}, "outputs": [{"type": "image/png", "data": "xx"}]}`,
		`{"dropped": -1}`, `[1,2]`, `{"outputs": [{"type": 7}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parseRunnerLine(line)
		if err != nil {
			return
		}
		res := &protocol.CellResult{Error: m.Error, Outputs: m.Outputs, Dropped: m.Dropped}
		if m.Value != nil {
			res.Value = *m.Value
		}
		protocol.Validate(res)
		b, err := protocol.EncodeCellResult(res)
		if err != nil {
			return // too large: the agent reports an error instead
		}
		if _, err := protocol.DecodeCellResult(b); err != nil {
			t.Fatalf("the host refuses what the agent sends: %v\n%s", err, b)
		}
	})
}

// FuzzPartialSuffix checks the end-of-cell mark scanner's carry-over:
// the kept tail is a proper start of the mark, and the longest one.
func FuzzPartialSuffix(f *testing.F) {
	mark := []byte("\x1eairlock-cell-end-0123\x1e")
	f.Add([]byte("hello\x1eair"))
	f.Add([]byte("\x1e"))
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k := partialSuffix(b, mark)
		if k < 0 || k >= len(mark) || k > len(b) || !bytes.Equal(b[len(b)-k:], mark[:k]) {
			t.Fatalf("partialSuffix(%q) = %d", b, k)
		}
		for j := k + 1; j < len(mark) && j <= len(b); j++ {
			if bytes.Equal(b[len(b)-j:], mark[:j]) {
				t.Fatalf("partialSuffix(%q) = %d, but %d also matches", b, k, j)
			}
		}
	})
}
