package e2b

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/airlockhq/airlock"
	pb "github.com/airlockhq/airlock/api/e2b/internal/envdpb/process"
)

// E2B's pty API (sandbox.pty in the SDKs) is a process started with a
// pty option: Start with pty.size, SendInput with input.pty, Update with
// pty.size, SendSignal to end it. Here it is one of the session's
// terminals (airlock.PTYService), attached for as long as it runs; its
// output goes out as data.pty events to the Start stream and any
// Connect.

// ptys returns the terminal service, or nil.
func (s *Server) ptys() airlock.PTYService {
	if s.cfg.PTYs != nil {
		return s.cfg.PTYs
	}
	p, _ := s.cfg.Sessions.(airlock.PTYService)
	return p
}

var errNoPTY = connect.NewError(connect.CodeUnimplemented, errors.New("terminals are not enabled on this server"))

// startPTY starts a terminal for a Start with a pty option.
func (s *Server) startPTY(ctx context.Context, ref *sandboxRef, req *pb.StartRequest, cwd string, env map[string]string) (*proc, *subscriber, error) {
	svc := s.ptys()
	if svc == nil {
		return nil, nil, errNoPTY
	}
	size := req.GetPty().GetSize()
	cols, rows := int(size.GetCols()), int(size.GetRows())
	if size == nil {
		cols, rows = 80, 24
	}
	cfg := req.GetProcess()
	info, err := svc.CreatePTY(ctx, ref.tenant, ref.id, airlock.CreatePTYRequest{
		Cols: cols, Rows: rows, Cmd: append([]string{cfg.GetCmd()}, cfg.GetArgs()...), Env: env, Cwd: cwd,
	})
	if err != nil {
		return nil, nil, s.connectError(ctx, "Start", err)
	}
	a, err := svc.AttachPTY(ctx, ref.tenant, ref.id, info.PTYID)
	if err != nil {
		svc.DeletePTY(context.WithoutCancel(ctx), ref.tenant, ref.id, info.PTYID)
		return nil, nil, s.connectError(ctx, "Start", err)
	}
	p := newProc(s.procs, ref.id, req.GetTag(), cfg)
	p.pty, p.ptyID = a, info.PTYID
	sub := p.subscribe()
	p.Started("", info.PID)
	go pumpPTY(p, a)
	return p, sub, nil
}

// pumpPTY publishes a terminal's output until it ends, then its end.
func pumpPTY(p *proc, a airlock.PTYAttachment) {
	for b := range a.Output() {
		p.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: &pb.ProcessEvent_DataEvent{
			Output: &pb.ProcessEvent_DataEvent_Pty{Pty: b}}}})
	}
	<-a.Done() // the output closes early only for a reader too slow; we never are (publish queues)
	end := &pb.ProcessEvent_EndEvent{ExitCode: -1, Status: "error"}
	if st, err := a.Exit(); err != nil {
		msg := airlock.ErrorMessage(err)
		end.Error = &msg
	} else {
		end.ExitCode, end.Exited = int32(st.Code), true
		end.Status = fmt.Sprintf("exit status %d", st.Code)
	}
	p.finish(end)
}

// ptyInput types into a terminal the API started.
func (s *Server) ptyInput(p *proc, b []byte) error {
	if err := p.pty.Input(b); err != nil {
		return connect.NewError(connect.CodeUnavailable, errors.New("the terminal did not take the input"))
	}
	return nil
}

// ptyKill ends a terminal the API started.
func (s *Server) ptyKill(ctx context.Context, ref *sandboxRef, p *proc) error {
	svc := s.ptys()
	if svc == nil {
		return errNoPTY
	}
	if err := svc.DeletePTY(ctx, ref.tenant, ref.id, p.ptyID); err != nil {
		return s.connectError(ctx, "SendSignal", err)
	}
	return nil
}

func (ps processService) Update(ctx context.Context, req *connect.Request[pb.UpdateRequest]) (*connect.Response[pb.UpdateResponse], error) {
	p, pid, err := ps.s.selected(refFrom(ctx), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p == nil || p.pty == nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no terminal with pid %d that this API started is running", pid))
	}
	size := req.Msg.GetPty().GetSize()
	if size == nil {
		return connect.NewResponse(&pb.UpdateResponse{}), nil
	}
	if err := p.pty.Resize(int(size.GetCols()), int(size.GetRows())); err != nil {
		var ae *airlock.Error
		if errors.As(err, &ae) {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New(ae.Message))
		}
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("the terminal could not be resized"))
	}
	return connect.NewResponse(&pb.UpdateResponse{}), nil
}
