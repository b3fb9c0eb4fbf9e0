package abuse

// Sample runs one round of the sampling loop now.
func (m *Monitor) Sample() { m.sampleAll() }
