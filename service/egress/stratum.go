package egress

import (
	"bytes"
	"encoding/json"
	"strings"
)

// FlagStratum marks a connection whose first message is a mining pool's
// JSON-RPC (stratum): the abuse monitor's mining detector acts on it.
const FlagStratum = "stratum"

// LooksLikeStratum reports whether a client's first bytes are a stratum
// request: a JSON object on the first line whose method is one a miner
// sends first (mining.subscribe, mining.authorize, mining.extranonce.*,
// or the login of the Monero dialect with a login and a pass). Only the
// method is looked at; nothing of the request is kept.
func LooksLikeStratum(head []byte) bool {
	line, _, _ := bytes.Cut(head, []byte("\n"))
	line = bytes.TrimSpace(line)
	if len(line) < 2 || line[0] != '{' {
		return false
	}
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &req) != nil {
		return false
	}
	switch m := strings.ToLower(req.Method); {
	case m == "mining.subscribe", m == "mining.authorize", strings.HasPrefix(m, "mining.extranonce"):
		return true
	case m == "login":
		var p struct {
			Login *string `json:"login"`
			Pass  *string `json:"pass"`
		}
		return json.Unmarshal(req.Params, &p) == nil && p.Login != nil && p.Pass != nil
	}
	return false
}
