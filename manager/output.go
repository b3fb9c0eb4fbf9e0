package manager

import "sync"

// cappedBuffer keeps the first max bytes written and counts the rest.
type cappedBuffer struct {
	mu        sync.Mutex
	max       int64
	buf       []byte
	truncated bool
}

func newCappedBuffer(max int64) *cappedBuffer { return &cappedBuffer{max: max} }

func (c *cappedBuffer) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.max - int64(len(c.buf))
	if int64(len(b)) > room {
		c.truncated = true
		if room > 0 {
			c.buf = append(c.buf, b[:room]...)
		}
		return len(b), nil
	}
	c.buf = append(c.buf, b...)
	return len(b), nil
}

func (c *cappedBuffer) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf), c.truncated
}
