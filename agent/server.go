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

	"github.com/airlockhq/airlock/protocol"
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

// server is one connection's state.
type server struct {
	cfg     Config
	conn    io.ReadWriter
	start   time.Time
	wmu     sync.Mutex
	mu      sync.Mutex
	streams map[uint32]streamHandler
	procs   *processTable
	warm    map[string]*warmRuntime // prepared runtimes by name, guarded by mu
	quit    chan struct{}

	contexts *contextTable // code contexts; see context.go
}

// streamHandler receives the host's frames after a stream's request.
type streamHandler interface {
	frame(f protocol.Frame)
	abort()
}

// ErrShutdown is returned by Serve after the host asked the agent to exit.
var ErrShutdown = errors.New("agent: shutdown requested")

// Serve speaks the protocol over conn until it ends, the host asks for a
// shutdown, or ctx is done.
func Serve(ctx context.Context, conn io.ReadWriter, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	s := &server{
		cfg:     cfg,
		conn:    conn,
		start:   time.Now(),
		streams: map[uint32]streamHandler{},
		warm:    map[string]*warmRuntime{},
		procs:   newProcessTable(),
		quit:    make(chan struct{}),

		contexts: newContextTable(),
	}
	defer s.procs.killAll()
	defer s.abortStreams() // e.g. remove the temporary file of an unfinished put
	defer s.contexts.closeAll()
	s.startReaper()
	if err := s.send(protocol.Frame{Type: protocol.THello, Payload: protocol.Encode(protocol.Hello{
		Version: protocol.Version, Agent: cfg.Build, PID: os.Getpid(),
	})}); err != nil {
		return err
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
			case <-s.quit:
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.quit:
			return ErrShutdown
		case err := <-errc:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case f := <-frames:
			s.dispatch(ctx, f)
		}
	}
}

func (s *server) send(f protocol.Frame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return protocol.WriteFrame(s.conn, f)
}

func (s *server) sendError(stream uint32, code string, err error) {
	s.send(protocol.Frame{Type: protocol.TError, Stream: stream, Payload: protocol.Encode(protocol.ErrorMessage{Code: code, Message: err.Error()})})
}

func (s *server) respond(stream uint32, r protocol.Response) {
	s.send(protocol.Frame{Type: protocol.TResponse, Stream: stream, Payload: protocol.Encode(r)})
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

// abortStreams ends every open stream. Serve calls it once its dispatch
// loop is over, so no handler is running.
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

func (s *server) dispatch(ctx context.Context, f protocol.Frame) {
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
		s.exec(ctx, f.Stream, req.Exec)
	case protocol.OpPut:
		s.put(f.Stream, req.Path, req.Mode)
	case protocol.OpGet:
		go s.get(f.Stream, req.Path, req.Max)
	case protocol.OpList:
		s.list(f.Stream, req.Path)
	case protocol.OpStat:
		s.stat(f.Stream, req.Path)
	case protocol.OpRemove:
		s.remove(f.Stream, req.Path)
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
	case protocol.OpShutdown:
		s.procs.killAll()
		s.respond(f.Stream, protocol.Response{})
		close(s.quit)
	}
}
