package abuse

import (
	"strings"

	"github.com/airlockhq/airlock"
)

// DefaultPools are well-known public mining pools (their domains). A
// query or connection for one of them, or a name under one, is mining.
var DefaultPools = []string{
	"2miners.com", "antpool.com", "c3pool.com", "ethermine.org", "f2pool.com",
	"hashvault.pro", "herominers.com", "kryptex.network", "minergate.com",
	"minexmr.com", "mining-dutch.nl", "moneroocean.stream", "nanopool.org",
	"nicehash.com", "poolin.com", "prohashing.com", "slushpool.com",
	"supportxmr.com", "unmineable.com", "viabtc.com", "xmrpool.eu", "zpool.ca",
	"braiins.com", "p2pool.io", "dxpool.com", "emcd.io", "binance-pool.com",
}

// pools matches names against a list of pool domains.
type pools map[string]bool

func newPools(cfg Mining) pools {
	p := pools{}
	if !cfg.NoBuiltinPools {
		for _, d := range DefaultPools {
			p[d] = true
		}
	}
	for _, d := range cfg.Pools {
		if n, ok := airlock.NormalizeHost(d); ok {
			p[n] = true
		}
	}
	return p
}

// match returns the list entry that name is or is under, "" if none.
func (p pools) match(name string) string {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	for name != "" {
		if p[name] {
			return name
		}
		_, rest, ok := strings.Cut(name, ".")
		if !ok {
			return ""
		}
		name = rest
	}
	return ""
}
