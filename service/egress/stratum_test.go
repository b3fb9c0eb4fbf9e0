package egress_test

import (
	"testing"

	"github.com/airlockhq/airlock/service/egress"
)

func TestLooksLikeStratum(t *testing.T) {
	cases := []struct {
		head string
		want bool
	}{
		{`{"id":1,"method":"mining.subscribe","params":["cpuminer/2.5"]}` + "\n", true},
		{`{"id": 2, "method": "mining.authorize", "params": ["wallet.worker", "x"]}`, true},
		{`{"id":3,"method":"mining.extranonce.subscribe","params":[]}` + "\n", true},
		{`{"id":1,"jsonrpc":"2.0","method":"login","params":{"login":"4Ab...","pass":"x","agent":"xmrig/6"}}` + "\n", true},
		{`{"id":1,"method":"login","params":{"user":"bob"}}` + "\n", false}, // a login of another JSON-RPC service
		{`{"id":1,"method":"eth_blockNumber","params":[]}` + "\n", false},
		{`{"msg":"mining.subscribe is the word"}` + "\n", false},
		{"SSH-2.0-OpenSSH_9.2\r\n", false},
		{"", false},
		{`{"method":"mining.subscribe"`, false}, // cut short: not a whole line of JSON
		{"\x16\x03\x01\x02\x00", false},
	}
	for _, c := range cases {
		if got := egress.LooksLikeStratum([]byte(c.head)); got != c.want {
			t.Errorf("LooksLikeStratum(%q) = %v, want %v", c.head, got, c.want)
		}
	}
}

func FuzzLooksLikeStratum(f *testing.F) {
	f.Add([]byte(`{"id":1,"method":"mining.subscribe","params":[]}` + "\n"))
	f.Add([]byte(`{"method":"login","params":{"login":"a","pass":"b"}}`))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		egress.LooksLikeStratum(b) // must not panic
	})
}
