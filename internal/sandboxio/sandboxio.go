package sandboxio

import (
	"errors"
	"io"
	"os"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/cgroups"
)

// PipeConn joins a sandbox's stdin and stdout pipes into one stream for
// the agent protocol.
type PipeConn struct {
	io.ReadCloser                // the sandbox's stdout
	W             io.WriteCloser // the sandbox's stdin
}

func (c PipeConn) Write(b []byte) (int, error) { return c.W.Write(b) }

// Close closes both pipes.
func (c PipeConn) Close() error { return errors.Join(c.W.Close(), c.ReadCloser.Close()) }

// CappedWriter writes at most N bytes to W and drops the rest, reporting
// every write as whole so the writer (a sandbox's stderr) never blocks.
type CappedWriter struct {
	W io.Writer
	N int64
}

func (c *CappedWriter) Write(b []byte) (int, error) {
	if c.N > 0 {
		k := min(int64(len(b)), c.N)
		c.W.Write(b[:k])
		c.N -= k
	}
	return len(b), nil
}

// LogTail returns the last 2 KiB of the log at path, for error messages.
func LogTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return string(b)
}

// Stats converts a sandbox cgroup's figures to domain stats.
func Stats(st cgroups.Stats) airlock.Stats {
	return airlock.Stats{
		PeakMemoryBytes: st.PeakMemoryBytes,
		MemoryBytes:     st.MemoryBytes,
		OOMKilled:       st.OOMKills > 0,
		CPUTime:         st.CPUTime,
		Pids:            st.Pids,
		PidsLimitHits:   st.PidsLimitHits,
		MemoryLimitHits: st.MemoryLimitHits,
	}
}
