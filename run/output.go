package run

import "sync"

// capture keeps the first max bytes of a stream, counts the rest as
// truncated, and passes every chunk on to an observer.
type capture struct {
	mu        sync.Mutex
	max       int64
	buf       []byte
	truncated bool
	observe   func([]byte)
}

func newCapture(max int64, observe func([]byte)) *capture {
	return &capture{max: max, observe: observe}
}

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	room := c.max - int64(len(c.buf))
	switch {
	case int64(len(b)) <= room:
		c.buf = append(c.buf, b...)
	case room > 0:
		c.buf = append(c.buf, b[:room]...)
		c.truncated = true
	default:
		c.truncated = true
	}
	c.mu.Unlock()
	if c.observe != nil {
		c.observe(b)
	}
	return len(b), nil
}

// note adds a line of the service's own (it counts against the cap).
func (c *capture) note(s string) { c.Write([]byte(s)) }

func (c *capture) markTruncated() {
	c.mu.Lock()
	c.truncated = true
	c.mu.Unlock()
}

func (c *capture) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf), c.truncated
}
