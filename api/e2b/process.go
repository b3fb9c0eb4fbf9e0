package e2b

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/airlockhq/airlock"
	pb "github.com/airlockhq/airlock/api/e2b/internal/envdpb/process"
	"github.com/airlockhq/airlock/api/e2b/internal/envdpb/process/processconnect"
)

// processService is envd's process service on the session service: a
// process is a session exec, recorded like any other.
type processService struct{ s *Server }

var _ processconnect.ProcessHandler = processService{}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds): how often an
// idle stream gets a keepalive event. 0: never.
func keepaliveInterval(h interface{ Get(string) string }) time.Duration {
	n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval"))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// processTimeout is a process's deadline: the request's Connect-Timeout-Ms
// (the SDKs send their timeoutMs, 60 s by default; 0 sends none), within
// the most a session exec may run; none means that most.
func (s *Server) processTimeout(h interface{ Get(string) string }) int {
	maxS := int(s.cfg.MaxProcessTimeout / time.Second)
	ms, err := strconv.ParseInt(h.Get("Connect-Timeout-Ms"), 10, 64)
	if err != nil || ms <= 0 {
		return maxS
	}
	return int(min((ms+999)/1000, int64(maxS)))
}

func (ps processService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	s := ps.s
	ref := refFrom(ctx)
	cfg := req.Msg.GetProcess()
	switch {
	case cfg == nil || cfg.GetCmd() == "":
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	case len(req.Msg.GetTag()) > 256:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("tag is longer than 256 bytes"))
	}
	userCwd := home
	if cfg.Cwd != nil && *cfg.Cwd != "" {
		userCwd = *cfg.Cwd
	}
	cwd, err := toSandbox(userCwd)
	if err != nil {
		return s.connectError(ctx, "Start", err)
	}
	env := map[string]string{"HOME": home, "USER": "user", "PWD": fromSandbox(cwd)}
	for k, v := range ref.envVars() {
		env[k] = v
	}
	for k, v := range cfg.GetEnvs() {
		env[k] = v
	}
	if req.Msg.Pty != nil {
		p, sub, err := s.startPTY(ctx, ref, req.Msg, cwd, env)
		if err != nil {
			return err
		}
		return s.stream(ctx, p, sub, keepaliveInterval(req.Header()), func(ev *pb.ProcessEvent) error {
			return stream.Send(&pb.StartResponse{Event: ev})
		})
	}
	exec := airlock.SessionExecRequest{
		Cmd:        append([]string{cfg.GetCmd()}, cfg.GetArgs()...),
		Env:        env,
		Cwd:        cwd,
		TimeoutSec: s.processTimeout(req.Header()),
		KeepStdin:  req.Msg.GetStdin(),
	}
	p := newProc(s.procs, ref.id, req.Msg.GetTag(), cfg)
	sub := p.subscribe()
	go s.runProcess(ref, exec, p)
	select {
	case <-p.started:
	case <-ctx.Done():
		return ctx.Err() // the process starts and runs on
	}
	if p.startErr != nil {
		return s.connectError(ctx, "Start", p.startErr)
	}
	return s.stream(ctx, p, sub, keepaliveInterval(req.Header()), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.StartResponse{Event: ev})
	})
}

// runProcess runs a process to its end through the session service, on a
// context of its own: it outlives the request that started it, up to its
// deadline.
func (s *Server) runProcess(ref *sandboxRef, req airlock.SessionExecRequest, p *proc) {
	e, err := s.cfg.Sessions.Exec(context.Background(), ref.tenant, ref.id, req, p)
	select {
	case <-p.started:
	default:
		if err == nil {
			err = errors.New("the process did not start")
		}
		p.startFailed(err)
		return
	}
	end := &pb.ProcessEvent_EndEvent{ExitCode: -1, Status: "error"}
	switch {
	case err != nil:
		msg := airlock.ErrorMessage(err)
		end.Error = &msg
	case e.TimedOut:
		end.ExitCode = int32(e.ExitCode)
		end.Status = "killed at its deadline"
		msg := fmt.Sprintf("the process was killed at its deadline of %ds (the request's timeout)", req.TimeoutSec)
		end.Error = &msg
	default:
		end.ExitCode = int32(e.ExitCode)
		end.Exited = true
		end.Status = fmt.Sprintf("exit status %d", e.ExitCode)
	}
	p.finish(end)
}

// stream sends a process's events to one reader: the start event, the
// output as it comes (keepalives while idle), the end.
func (s *Server) stream(ctx context.Context, p *proc, sub *subscriber, keepalive time.Duration, send func(*pb.ProcessEvent) error) error {
	defer p.unsubscribe(sub)
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: uint32(p.pid)}}}); err != nil {
		return err
	}
	var tick <-chan time.Time
	if keepalive > 0 {
		t := time.NewTicker(keepalive)
		defer t.Stop()
		tick = t.C
	}
	for {
		evs, dropped := sub.take()
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return err
			}
		}
		if dropped {
			return connect.NewError(connect.CodeResourceExhausted, errors.New("the output stream was dropped: it was read too slowly; the process runs on"))
		}
		select {
		case <-sub.wake:
		case <-p.done:
			evs, dropped := sub.take()
			for _, ev := range evs {
				if err := send(ev); err != nil {
					return err
				}
			}
			if dropped {
				return connect.NewError(connect.CodeResourceExhausted, errors.New("the output stream was dropped: it was read too slowly"))
			}
			if p.end == nil {
				return connect.NewError(connect.CodeUnavailable, errors.New("the process ended without a status"))
			}
			return send(&pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: p.end}})
		case <-tick:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// selected finds the process a selector names.
func (s *Server) selected(ref *sandboxRef, sel *pb.ProcessSelector) (*proc, int, error) {
	if sel == nil || sel.GetSelector() == nil {
		return nil, 0, connect.NewError(connect.CodeInvalidArgument, errors.New("process selector (pid or tag) is required"))
	}
	pid, tag := int(sel.GetPid()), sel.GetTag()
	p := s.procs.find(ref.id, pid, tag)
	if p == nil && pid == 0 {
		return nil, 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("no running process with tag %q", clip(tag, 64)))
	}
	if p != nil {
		pid = p.pid
	}
	return p, pid, nil
}

func (ps processService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	p, pid, err := ps.s.selected(refFrom(ctx), req.Msg.GetProcess())
	if err != nil {
		return err
	}
	if p == nil {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("no process with pid %d that this API started is running", pid))
	}
	sub := p.subscribe()
	return ps.s.stream(ctx, p, sub, keepaliveInterval(req.Header()), func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.ConnectResponse{Event: ev})
	})
}

func (ps processService) List(ctx context.Context, req *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	ref := refFrom(ctx)
	out := &pb.ListResponse{}
	for _, p := range ps.s.procs.list(ref.id) {
		info := &pb.ProcessInfo{Config: p.config, Pid: uint32(p.pid)}
		if p.tag != "" {
			tag := p.tag
			info.Tag = &tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

func (ps processService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	ref := refFrom(ctx)
	p, pid, err := ps.s.selected(ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p != nil && p.pty != nil {
		if err := ps.s.ptyKill(ctx, ref, p); err != nil {
			return nil, err
		}
		return connect.NewResponse(&pb.SendSignalResponse{}), nil
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case pb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM"))
	}
	if err := ps.s.cfg.Sessions.SignalExec(ctx, ref.tenant, ref.id, pid, int(sig)); err != nil {
		return nil, ps.s.connectError(ctx, "SendSignal", err)
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}

func (ps processService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	ref := refFrom(ctx)
	p, pid, err := ps.s.selected(ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p != nil && p.pty != nil {
		b := req.Msg.GetInput().GetPty()
		if b == nil {
			b = req.Msg.GetInput().GetStdin()
		}
		if err := ps.s.ptyInput(p, b); err != nil {
			return nil, err
		}
		return connect.NewResponse(&pb.SendInputResponse{}), nil
	}
	if req.Msg.GetInput().GetPty() != nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no terminal with pid %d that this API started is running", pid))
	}
	if err := ps.s.cfg.Sessions.WriteStdin(ctx, ref.tenant, ref.id, pid, req.Msg.GetInput().GetStdin()); err != nil {
		return nil, ps.s.connectError(ctx, "SendInput", err)
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

func (ps processService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	ref := refFrom(ctx)
	_, pid, err := ps.s.selected(ref, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := ps.s.cfg.Sessions.CloseStdin(ctx, ref.tenant, ref.id, pid); err != nil {
		return nil, ps.s.connectError(ctx, "CloseStdin", err)
	}
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

func (ps processService) StreamInput(context.Context, *connect.ClientStream[pb.StreamInputRequest]) (*connect.Response[pb.StreamInputResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("StreamInput is not supported by Airlock; use SendInput"))
}
