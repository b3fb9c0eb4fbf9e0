package session

import "context"

// SampleRounds runs n rounds of the sampler now, as its loop does.
func (m *Manager) SampleRounds(ctx context.Context, n int) {
	marks := map[string]cpuMark{}
	for range n {
		m.sampleAll(ctx, marks)
	}
}
