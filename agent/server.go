package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// Config configures the agent.
type Config struct {
	Workspace string   // absolute path of the workspace, e.g. /workspace
	Env       []string // base environment of every program
	Build     string   // build identifier sent in the Hello
	Log       *log.Logger

	// SelfExe is this agent's binary, which starts programs under a memory
	// limit (see RunHelperIfAsked); default os.Executable().
	SelfExe string
}

// Validate checks the config.
func (c *Config) Validate() error {
	if c.Workspace == "" || c.Workspace[0] != '/' {
		return fmt.Errorf("agent: workspace must be an absolute path")
	}
	if c.Log == nil {
		c.Log = log.New(io.Discard, "", 0)
	}
	return nil
}

// core is the agent's lasting state: what outlives a host connection.
type core struct {
	cfg      Config
	start    time.Time
	procs    *processTable  // every process the agent started and has not reaped
	retained *retainedTable // execs with RetainBytes; see processes.go
	contexts *contextTable  // code contexts; see context.go

	warmMu sync.Mutex
	warm   map[string]*warmRuntime // prepared runtimes by name

	chMu    sync.Mutex
	channel *protocol.ChannelRequest // where to dial; nil until the host sets it

	quit     chan struct{} // closed by a shutdown request
	quitOnce sync.Once
}

// server is one host connection. Its streams end with it; what it started
// may outlive it (see abort in exec.go and context.go).
type server struct {
	*core
	conn io.ReadWriter

	wmu sync.Mutex // serialises frame writes

	mu      sync.Mutex
	streams map[uint32]streamHandler

	done       chan struct{} // closed once the connection is over
	broken     chan struct{} // closed at the first write error
	brokenOnce sync.Once
	werr       error // the write error, set before broken is closed
}

// streamHandler receives the host's frames after a stream's request.
type streamHandler interface {
	frame(f protocol.Frame)
	// abort ends the stream when its connection is over; it runs after
	// the connection's dispatch loop has stopped.
	abort()
}

// ErrShutdown is returned by Run and Serve after the host asked the agent
// to exit.
var ErrShutdown = errors.New("agent: shutdown requested")

// errConnDone is returned for a frame sent on a connection that is over.
var errConnDone = errors.New("agent: connection is over")

// Serve is Run: it speaks the protocol over conn and, if the host set a
// channel, over the channel after conn ends. Without a channel it returns
// when conn ends (nil at EOF), having ended every program.
func Serve(ctx context.Context, conn io.ReadWriter, cfg Config) error {
	return Run(ctx, conn, cfg)
}

func newCore(cfg Config) *core {
	return &core{
		cfg:      cfg,
		start:    time.Now(),
		procs:    newProcessTable(),
		retained: newRetainedTable(),
		contexts: newContextTable(),
		warm:     map[string]*warmRuntime{},
		quit:     make(chan struct{}),
	}
}

// end kills everything the agent started: it is exiting.
func (c *core) end() {
	c.contexts.closeAll()
	c.procs.killAll()
}

// serve speaks the protocol over one connection until it ends, the host
// asks for a shutdown or ctx is done. token goes in the Hello. heard says
// whether the host sent anything at all.
func (c *core) serve(ctx context.Context, conn io.ReadWriter, token string) (heard bool, err error) {
	s := &server{
		core:    c,
		conn:    conn,
		streams: map[uint32]streamHandler{},
		done:    make(chan struct{}),
		broken:  make(chan struct{}),
	}
	defer s.end()
	if err := s.send(protocol.Frame{Type: protocol.THello, Payload: protocol.Encode(protocol.Hello{
		Version: protocol.Version, Agent: c.cfg.Build, PID: os.Getpid(), Token: token,
	})}); err != nil {
		return false, err
	}
	frames := make(chan protocol.Frame)
	errc := make(chan error, 1)
	go func() {
		for {
			f, err := protocol.ReadFrame(conn)
			if err != nil {
				errc <- err
				return
			}
			select {
			case frames <- f:
			case <-s.done:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return heard, ctx.Err()
		case <-c.quit:
			return heard, ErrShutdown
		case <-s.broken:
			return heard, s.werr
		case err := <-errc:
			return heard, err
		case f := <-frames:
			heard = true
			s.dispatch(f)
		}
	}
}

// end marks the connection over and aborts its streams. A connection the
// agent can close is closed, so a reader or writer blocked on it returns.
func (s *server) end() {
	close(s.done)
	s.abortStreams() // e.g. remove the temporary file of an unfinished put
	if cl, ok := s.conn.(io.Closer); ok {
		cl.Close()
	}
}

func (s *server) isDone() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *server) send(f protocol.Frame) error {
	if s.isDone() {
		return errConnDone
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := protocol.WriteFrame(s.conn, f)
	if err != nil && !errors.Is(err, protocol.ErrFrameTooLarge) {
		s.brokenOnce.Do(func() {
			s.werr = fmt.Errorf("agent: write: %w", err)
			close(s.broken)
		})
	}
	return err
}

// sendAll sends b as frames of type t, split at MaxPayload.
func (s *server) sendAll(t protocol.Type, stream uint32, b []byte) error {
	for len(b) > 0 {
		n := min(len(b), protocol.MaxPayload)
		if err := s.send(protocol.Frame{Type: t, Stream: stream, Payload: b[:n]}); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func (s *server) sendError(stream uint32, code string, err error) {
	s.send(protocol.Frame{Type: protocol.TError, Stream: stream, Payload: protocol.Encode(protocol.ErrorMessage{Code: code, Message: err.Error()})})
}

func (s *server) respond(stream uint32, r protocol.Response) error {
	return s.send(protocol.Frame{Type: protocol.TResponse, Stream: stream, Payload: protocol.Encode(r)})
}

func (s *server) setHandler(id uint32, h streamHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h == nil {
		delete(s.streams, id)
	} else {
		s.streams[id] = h
	}
}

// clearHandler removes h from its stream, if it is still there.
func (s *server) clearHandler(id uint32, h streamHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[id] == h {
		delete(s.streams, id)
	}
}

// abortStreams ends every open stream. It runs once the dispatch loop is
// over, so no handler is running.
func (s *server) abortStreams() {
	s.mu.Lock()
	streams := s.streams
	s.streams = map[uint32]streamHandler{}
	s.mu.Unlock()
	for _, h := range streams {
		h.abort()
	}
}

func (s *server) handler(id uint32) streamHandler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[id]
}

func (s *server) dispatch(f protocol.Frame) {
	if f.Type != protocol.TRequest {
		if h := s.handler(f.Stream); h != nil {
			h.frame(f)
		}
		return
	}
	var req protocol.Request
	if err := protocol.Decode(f.Payload, &req); err != nil {
		s.sendError(f.Stream, "invalid", err)
		return
	}
	switch req.Op {
	case protocol.OpHealth:
		s.respond(f.Stream, protocol.Response{Health: &protocol.Health{
			UptimeMS:  time.Since(s.start).Milliseconds(),
			Processes: s.procs.count(),
		}})
	case protocol.OpExec:
		s.exec(f.Stream, req.Exec)
	case protocol.OpPut:
		s.put(f.Stream, req.Path, req.Mode)
	case protocol.OpGet:
		go s.get(f.Stream, req.Path, req.Max)
	case protocol.OpList:
		s.list(f.Stream, req.Path)
	case protocol.OpStat:
		s.stat(f.Stream, req.Path)
	case protocol.OpRemove:
		if req.Recursive {
			s.removeAll(f.Stream, req.Path)
		} else {
			s.remove(f.Stream, req.Path)
		}
	case protocol.OpMkdir:
		s.mkdir(f.Stream, req.Path)
	case protocol.OpMove:
		s.move(f.Stream, req.Path, req.Dest)
	case protocol.OpPrepare:
		go s.prepare(f.Stream, req.Prepare) // imports take a while
	case protocol.OpContextCreate:
		go s.contextCreate(f.Stream, req.Context)
	case protocol.OpContextRun:
		go s.contextRun(f.Stream, req.Context)
	case protocol.OpContextRestart:
		go s.contextRestart(f.Stream, req.Context)
	case protocol.OpContextClose:
		go s.contextClose(f.Stream, req.Context)
	case protocol.OpContextList:
		s.respond(f.Stream, protocol.Response{Contexts: s.contexts.list()})
	case protocol.OpChannel:
		s.setChannel(f.Stream, req.Channel)
	case protocol.OpProcesses:
		go func() {
			ps, more := s.retained.list()
			s.respond(f.Stream, protocol.Response{Processes: ps, More: more})
		}()
	case protocol.OpAttach:
		s.attach(f.Stream, &req)
	case protocol.OpDetach:
		s.detach(f.Stream, req.PID)
	case protocol.OpPort:
		go s.port(f.Stream, req.Port) // connecting may take a moment
	case protocol.OpShutdown:
		s.procs.killAll()
		s.respond(f.Stream, protocol.Response{})
		s.quitOnce.Do(func() { close(s.quit) })
	}
}
