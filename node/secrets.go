package node

import (
	"github.com/airlockhq/airlock/internal/secretscan"
	"github.com/airlockhq/airlock/service/broker"
)

// hostSecrets are the values airlockd holds that nothing a sandbox is
// given may contain: its key files in the state directory (read at every
// scan, so keys made after start count too), the metrics key, and the
// broker's credentials (added by startEgress). Base snapshots are
// scanned for them.
func hostSecrets(stateDir, metricsKey string) *secretscan.Known {
	k := &secretscan.Known{}
	k.AddStateDir(stateDir)
	if metricsKey != "" {
		k.Add("airlockd metrics key", []byte(metricsKey))
	}
	return k
}

// brokerSecrets is a source of the broker's current credentials.
func brokerSecrets(bk *broker.Broker) func() []secretscan.Secret {
	return func() []secretscan.Secret {
		var out []secretscan.Secret
		for scope, v := range bk.Credentials() {
			out = append(out, secretscan.Secret{Name: "broker credential of scope " + scope, Value: []byte(v)})
		}
		return out
	}
}
