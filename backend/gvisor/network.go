package gvisor

import (
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/airlockhq/airlock"
)

// applyNetwork puts a sandbox with a network (spec.Network, made by the
// node's egress) into its namespace: runsc's netstack takes over the
// namespace's link (`--network=sandbox`, see networkFlags), and the
// sandbox's /etc/resolv.conf names the namespace's only resolver. A
// sandbox without one keeps `--network=none` and an empty namespace.
func applyNetwork(s *specs.Spec, n *airlock.SandboxNetwork, dir string) error {
	if n == nil {
		return nil
	}
	if n.NetNSPath == "" {
		return fmt.Errorf("gvisor: a sandbox network needs a namespace")
	}
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(n.ResolvConf), 0o644); err != nil {
		return fmt.Errorf("gvisor: %w", err)
	}
	s.Mounts = append(s.Mounts, specs.Mount{
		Destination: "/etc/resolv.conf", Type: "bind", Source: resolv,
		Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"},
	})
	for i := range s.Linux.Namespaces {
		if s.Linux.Namespaces[i].Type == specs.NetworkNamespace {
			s.Linux.Namespaces[i].Path = n.NetNSPath
		}
	}
	return nil
}

// networkFlags are the runsc flags of a sandbox's network; they follow the
// global flags, so they override `--network none`.
func networkFlags(n *airlock.SandboxNetwork) []string {
	if n == nil {
		return nil
	}
	return []string{"--network", "sandbox"}
}
