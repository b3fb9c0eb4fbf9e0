package provision

// PoolMemberIDs lists the sandbox IDs of the pool's ready members.
func (p *Provisioner) PoolMemberIDs() []string {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	var ids []string
	for _, e := range p.pool.entries {
		for _, mb := range e.members {
			ids = append(ids, mb.sb.ID())
		}
	}
	return ids
}
