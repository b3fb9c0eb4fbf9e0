package teststack

import (
	"encoding/json"
	"fmt"
	"testing"
)

// CloneCode is a Python program (of the data-science image: it imports
// numpy) that prints, as a JSON list, everything random a sandbox
// restored from a base snapshot must not share with its siblings: the
// interpreter's generator, a UUID, a secrets token, numpy's generator,
// OpenSSL's and the kernel's (SystemRandom).
const CloneCode = `import json, random, uuid, secrets, numpy
import ssl
print(json.dumps([random.random(), str(uuid.uuid4()), secrets.token_hex(16), float(numpy.random.rand()), ssl.RAND_bytes(16).hex(), random.SystemRandom().random()]))`

// CheckClonesDiffer fails t when two outputs of CloneCode share a value.
func CheckClonesDiffer(t testing.TB, outs []string) {
	t.Helper()
	seen := map[string]int{}
	for i, out := range outs {
		var vals []any
		if err := json.Unmarshal([]byte(out), &vals); err != nil || len(vals) < 3 {
			t.Fatalf("clone %d printed %q", i, out)
		}
		for j, v := range vals {
			key := fmt.Sprintf("%d:%v", j, v)
			if prev, dup := seen[key]; dup {
				t.Errorf("clone %d and clone %d share value #%d: %v", prev, i, j, v)
			}
			seen[key] = i
		}
	}
}
