package gvisor

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// The agent's channel that outlives airlockd. While airlockd lives it
// speaks to the agent over the stdio pipes it gave `runsc run`. When it
// goes away (a crash, a kill, a clean stop that keeps sessions) the agent
// keeps everything running and dials a unix socket in /run/airlock inside
// the sandbox, again and again: a read-only bind mount of a host
// directory of the sandbox's own (chanDir) that holds nothing but that
// socket, reachable because runsc runs with --host-uds=open. A new
// airlockd listens there (Reattach), and the agent proves who it is with
// the token airlockd gave it at start (over stdio, which nothing else in
// the sandbox can read) and kept on the host (tokenFile), since code in
// the sandbox can see and dial the socket too.

const (
	// ChannelDir is where the channel directory is mounted in the sandbox
	// (the images carry it as an empty directory).
	ChannelDir = "/run/airlock"
	// channelSocket is the socket's name in it.
	channelSocket = "agent.sock"
	tokenFile     = "channel.token"
)

func chanDir(dir string) string { return filepath.Join(dir, "chan") }

// newChannel makes a sandbox's channel directory (empty, root's, readable
// by the sandbox) and its token, and returns the token.
func newChannel(dir string) (string, error) {
	if err := os.Mkdir(chanDir(dir), 0o755); err != nil {
		return "", fmt.Errorf("gvisor: %w", err)
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	if err := os.WriteFile(filepath.Join(dir, tokenFile), []byte(token), 0o600); err != nil {
		return "", fmt.Errorf("gvisor: %w", err)
	}
	return token, nil
}

// giveChannel tells the agent where to dial when its stdio ends, and the
// token to prove itself with.
func giveChannel(ctx context.Context, agent *protocol.Client, token string) error {
	if err := agent.SetChannel(ctx, ChannelDir+"/"+channelSocket, token); err != nil {
		return fmt.Errorf("gvisor: give the agent its channel: %w", err)
	}
	return nil
}

// acceptAgent listens on the channel of the sandbox in dir until its
// agent has dialed and proved itself with the sandbox's token, or the
// timeout passes. Connections that do not prove themselves are closed.
func acceptAgent(ctx context.Context, dir string, timeout time.Duration) (*protocol.Client, error) {
	token, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if err != nil {
		return nil, fmt.Errorf("gvisor: the sandbox's channel token: %w", err)
	}
	path := filepath.Join(chanDir(dir), channelSocket)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("gvisor: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("gvisor: listen on the sandbox's channel: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	defer ln.Close()
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, fmt.Errorf("gvisor: %w", err)
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ln.SetDeadline(deadline)
	// Every caller is heard at once, each with its own short deadline to
	// prove itself, so code in the sandbox that dials the socket again
	// and again (it can see it) cannot hold the agent's call back until
	// the timeout; past helloParallel callers waiting, more are closed
	// unheard.
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	won := make(chan *protocol.Client, 1)
	sem := make(chan struct{}, helloParallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	accepted := make(chan error, 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				accepted <- err
				return
			}
			select {
			case sem <- struct{}{}:
			default:
				conn.Close()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				c := protocol.NewClient(conn)
				cctx, ccancel := context.WithTimeout(hctx, helloTimeout)
				h, err := c.WaitHello(cctx)
				ccancel()
				if err == nil && h.TokenMatches(string(token)) {
					select {
					case won <- c:
						cancel() // the others give up now
						return
					default:
					}
				}
				c.Close()
			}()
		}
	}()
	select {
	case c := <-won:
		ln.Close()
		<-accepted
		return c, nil
	case err := <-accepted:
		cancel()
		wg.Wait()
		select {
		case c := <-won:
			return c, nil
		default:
		}
		return nil, fmt.Errorf("gvisor: the agent did not call back within %s: %w", timeout, err)
	}
}

// helloParallel bounds the callers of a channel heard at once, and
// helloTimeout how long each may take to prove itself.
const (
	helloParallel = 16
	helloTimeout  = 2 * time.Second
)
