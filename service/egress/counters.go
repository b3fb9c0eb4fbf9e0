package egress

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// NetCounters returns the bytes the sandbox received and sent on its
// link, read from the host end of its veth pair (what the host end sent
// the sandbox received): two small reads of sysfs.
func (a *attachment) NetCounters() (rxBytes, txBytes int64, err error) {
	stats := filepath.Join("/sys/class/net", a.link.HostIf, "statistics")
	if txBytes, err = readCounter(filepath.Join(stats, "rx_bytes")); err != nil {
		return 0, 0, err
	}
	if rxBytes, err = readCounter(filepath.Join(stats, "tx_bytes")); err != nil {
		return 0, 0, err
	}
	return rxBytes, txBytes, nil
}

func readCounter(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("egress: link counter: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("egress: link counter %s: %w", path, err)
	}
	return n, nil
}
