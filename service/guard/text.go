package guard

import (
	"path"
	"strings"
)

// Facts about literal text that every language's rules share.

// stratum reports whether s names a mining pool's stratum endpoint.
func stratum(s string) bool {
	l := strings.ToLower(s)
	for _, scheme := range []string{"stratum+tcp://", "stratum+ssl://", "stratum+tls://", "stratum2+tcp://", "stratum1+tcp://", "stratum://"} {
		if strings.Contains(l, scheme) {
			return true
		}
	}
	return false
}

// hostPath returns the host-escape path s reaches, or "".
func hostPath(s string) string {
	for _, p := range []string{"/proc/1/root", "/proc/1/ns/", "/proc/1/cwd", "/proc/sys/kernel/core_pattern", "docker.sock", "containerd.sock", "crio.sock", "/run/containerd/"} {
		if strings.Contains(s, p) {
			return strings.TrimSuffix(p, "/")
		}
	}
	return ""
}

// under reports whether p is dir or a path below it.
func under(p, dir string) bool {
	if p == "" || !strings.HasPrefix(p, "/") {
		return false
	}
	p = path.Clean(p)
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// shellName reports whether a program (a path or a name) is a shell.
func shellName(prog string) bool {
	return shells[path.Base(strings.TrimSpace(prog))]
}
