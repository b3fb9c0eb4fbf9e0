package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// The channel (protocol.OpChannel): a unix socket path where the host
// listens, bind-mounted into the sandbox. The agent dials it once its
// first stream has ended, so the sandbox outlives the host process that
// started it.

const (
	// maxUnixPath is the longest path a unix socket address holds.
	maxUnixPath = 108

	// Waits between dial attempts: short, so a new host is reached soon
	// after it listens; doubling up to the cap while nobody answers.
	dialBackoffMin = 20 * time.Millisecond
	dialBackoffMax = 250 * time.Millisecond

	dialTimeout = 5 * time.Second // one attempt
)

// Run speaks the protocol over first (the agent's stdio under runsc) until
// it ends. If by then the host has set a channel (protocol.OpChannel), the
// agent keeps its retained programs, code contexts and warm runtimes, and
// dials the channel's path again and again until a host listens there; it
// sends that host a Hello with the channel's token, serves it, and when
// that connection ends dials again. Programs started without RetainBytes
// end with the connection that started them.
//
// Run returns ErrShutdown after a shutdown request, ctx's error when ctx
// ends, and, if no channel was ever set, when first ends (nil at EOF).
// Every program the agent started is ended then.
func Run(ctx context.Context, first io.ReadWriter, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	c := newCore(cfg)
	defer c.end()
	c.startReaper()
	_, err := c.serve(ctx, first, "")
	wait := dialBackoffMin
	for {
		if stop := c.stopped(ctx); stop != nil {
			return stop
		}
		if c.channelConfig() == nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		c.cfg.Log.Printf("host connection ended (%v); dialing the channel", err)
		conn, token, derr := c.dial(ctx, &wait)
		if derr != nil {
			return derr
		}
		var heard bool
		heard, err = c.serve(ctx, conn, token)
		conn.Close()
		if heard {
			wait = dialBackoffMin
		} else if serr := c.sleep(ctx, &wait); serr != nil {
			// A host that hangs up at once is not dialed in a loop.
			return serr
		}
	}
}

// stopped returns why the agent must stop, or nil.
func (c *core) stopped(ctx context.Context) error {
	select {
	case <-c.quit:
		return ErrShutdown
	default:
		return ctx.Err()
	}
}

func (c *core) channelConfig() *protocol.ChannelRequest {
	c.chMu.Lock()
	defer c.chMu.Unlock()
	return c.channel
}

// dial connects to the channel (its path as set at each attempt) and
// returns the connection and the token for its Hello.
func (c *core) dial(ctx context.Context, wait *time.Duration) (net.Conn, string, error) {
	d := net.Dialer{Timeout: dialTimeout}
	for {
		ch := c.channelConfig()
		conn, err := d.DialContext(ctx, "unix", ch.Path)
		if err == nil {
			return conn, ch.Token, nil
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, "", err
		}
	}
}

// sleep waits for *wait, then doubles it (up to the cap). It returns early
// with an error when the agent must stop.
func (c *core) sleep(ctx context.Context, wait *time.Duration) error {
	t := time.NewTimer(*wait)
	defer t.Stop()
	*wait = min(2**wait, dialBackoffMax)
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
	case <-c.quit:
	}
	return c.stopped(ctx)
}

// setChannel remembers where to dial, replacing what was set before.
func (s *server) setChannel(stream uint32, req *protocol.ChannelRequest) {
	if len(req.Path) > maxUnixPath {
		s.sendError(stream, "invalid", fmt.Errorf("channel path longer than the %d bytes of a unix socket address", maxUnixPath))
		return
	}
	ch := *req
	s.chMu.Lock()
	s.channel = &ch
	s.chMu.Unlock()
	s.respond(stream, protocol.Response{})
}
