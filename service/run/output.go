package run

import "sync"

// capture keeps the first max bytes of a stream, counts the rest as
// truncated, and passes every chunk on to an observer, in order. Chunks
// that come before the observer has been told the program started are
// held back until then (open), so an observer sees Started first.
type capture struct {
	mu        sync.Mutex
	max       int64
	buf       []byte
	truncated bool
	observe   func([]byte)
	open      bool      // the observer may be called
	held      [][]byte  // chunks that came before open
	count     func(int) // told the size of every chunk (activity for the watchdog)
}

func newCapture(max int64, observe func([]byte)) *capture {
	return &capture{max: max, observe: observe}
}

func (c *capture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count != nil {
		c.count(len(b))
	}
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
	if c.observe == nil {
		return len(b), nil
	}
	if !c.open {
		c.held = append(c.held, append([]byte(nil), b...))
		return len(b), nil
	}
	// Under the lock, so chunks reach the observer in order; observers
	// do not block (they buffer, or drop a stream that falls behind).
	c.observe(b)
	return len(b), nil
}

// start lets chunks through to the observer, those held back first.
func (c *capture) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open = true
	for _, b := range c.held {
		c.observe(b)
	}
	c.held = nil
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
