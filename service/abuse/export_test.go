package abuse

// Sample runs one round of the sampling loop now.
func (m *Monitor) Sample() { m.sampleAll() }

// Settle waits for the responses under way.
func (m *Monitor) Settle() { m.responding.Wait() }
