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
	"time"

	"github.com/airlockhq/airlock/protocol"
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
	for {
		ln.SetDeadline(deadline)
		conn, err := ln.Accept()
		if err != nil {
			return nil, fmt.Errorf("gvisor: the agent did not call back within %s: %w", timeout, err)
		}
		c := protocol.NewClient(conn)
		hd := time.Now().Add(2 * time.Second)
		if deadline.Before(hd) {
			hd = deadline
		}
		hctx, cancel := context.WithDeadline(ctx, hd)
		h, err := c.WaitHello(hctx)
		cancel()
		if err == nil && h.TokenMatches(string(token)) {
			return c, nil
		}
		c.Close()
	}
}
