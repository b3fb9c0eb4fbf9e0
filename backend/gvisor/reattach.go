package gvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/airlockhq/airlock"
)

var _ airlock.Reattacher = (*Backend)(nil)

// Reattach finds sandbox id, which this backend started in this or an
// earlier process and which still runs, and connects to its agent again
// over its channel (see channel.go): the agent dials in and proves itself
// with the sandbox's token within StartTimeout. The sandbox is then as
// any other of this backend.
func (b *Backend) Reattach(ctx context.Context, id string) (airlock.Sandbox, error) {
	if !validID.MatchString(id) {
		return nil, fmt.Errorf("gvisor: invalid sandbox id %q", id)
	}
	dir := filepath.Join(b.cfg.sandboxesDir(), id)
	if _, err := os.Stat(filepath.Join(dir, tokenFile)); err != nil {
		return nil, fmt.Errorf("gvisor: sandbox %s cannot be reattached: %w", id, err)
	}
	s := &Sandbox{b: b, id: id, dir: dir, cgroup: b.cgroupPath(id), exited: make(chan struct{}), started: true}
	if data, err := os.ReadFile(filepath.Join(dir, "labels.json")); err == nil {
		json.Unmarshal(data, &s.labels)
	}
	b.mu.Lock()
	if _, dup := b.live[id]; dup {
		b.mu.Unlock()
		return nil, fmt.Errorf("gvisor: sandbox %s is held already", id)
	}
	b.live[id] = s
	b.mu.Unlock()
	pid, _, err := b.processes(id)
	if err == nil && !isSandboxProcess(pid, id) {
		err = fmt.Errorf("gvisor: sandbox %s is not running", id)
	}
	if err == nil {
		err = watch(pid, s.markExited)
	}
	if err != nil {
		b.forget(id)
		return nil, err
	}
	agent, err := acceptAgent(ctx, dir, b.cfg.StartTimeout)
	if err != nil {
		b.forget(id)
		return nil, fmt.Errorf("gvisor: reattach %s: %w", id, err)
	}
	s.agent = agent
	return s, nil
}
