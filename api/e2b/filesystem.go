package e2b

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/airlockhq/airlock"
	pb "github.com/airlockhq/airlock/api/e2b/internal/envdpb/filesystem"
	"github.com/airlockhq/airlock/api/e2b/internal/envdpb/filesystem/filesystemconnect"
)

// filesystemService is envd's filesystem service on the session's file
// calls: paths are mapped (/home/user is the workspace), and every one
// is walked by the agent without following symlinks.
type filesystemService struct{ s *Server }

var _ filesystemconnect.FilesystemHandler = filesystemService{}

// Bounds of ListDir.
const (
	maxListDepth   = 32
	maxListEntries = 10000
)

// entryInfo describes an entry of the session at the E2B path p.
func entryInfo(p string, e *airlock.FileEntry) *pb.EntryInfo {
	perm, _ := strconv.ParseUint(e.Mode, 8, 32)
	mode := fs.FileMode(perm) & fs.ModePerm
	typ := pb.FileType_FILE_TYPE_UNSPECIFIED
	switch e.Type {
	case "file":
		typ = pb.FileType_FILE_TYPE_FILE
	case "dir":
		typ, mode = pb.FileType_FILE_TYPE_DIRECTORY, mode|fs.ModeDir
	case "symlink":
		typ, mode = pb.FileType_FILE_TYPE_SYMLINK, mode|fs.ModeSymlink
	}
	return &pb.EntryInfo{
		Name:         e.Name,
		Type:         typ,
		Path:         p,
		Size:         e.Size,
		Mode:         uint32(mode),
		Permissions:  mode.String(),
		Owner:        "user",
		Group:        "user",
		ModifiedTime: timestamppb.New(e.ModTime),
	}
}

// userPath checks the request's user and maps its path.
func (fsv filesystemService) userPath(ctx context.Context, header interface{ Get(string) string }, p string) (string, error) {
	if _, err := basicUser(header.Get("Authorization")); err != nil {
		return "", err
	}
	return toSandbox(p)
}

func (fsv filesystemService) Stat(ctx context.Context, req *connect.Request[pb.StatRequest]) (*connect.Response[pb.StatResponse], error) {
	ref := refFrom(ctx)
	p, err := fsv.userPath(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, fsv.s.connectError(ctx, "Stat", err)
	}
	e, err := fsv.s.cfg.Sessions.StatFile(ctx, ref.tenant, ref.id, p)
	if err != nil {
		return nil, fsv.s.connectError(ctx, "Stat", err)
	}
	if p == workspace {
		e.Name = path.Base(home)
	}
	return connect.NewResponse(&pb.StatResponse{Entry: entryInfo(fromSandbox(p), e)}), nil
}

func (fsv filesystemService) MakeDir(ctx context.Context, req *connect.Request[pb.MakeDirRequest]) (*connect.Response[pb.MakeDirResponse], error) {
	ref := refFrom(ctx)
	p, err := fsv.userPath(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, fsv.s.connectError(ctx, "MakeDir", err)
	}
	e, err := fsv.s.cfg.Sessions.MakeDir(ctx, ref.tenant, ref.id, p)
	if err != nil {
		return nil, fsv.s.connectError(ctx, "MakeDir", err)
	}
	return connect.NewResponse(&pb.MakeDirResponse{Entry: entryInfo(fromSandbox(p), e)}), nil
}

func (fsv filesystemService) Move(ctx context.Context, req *connect.Request[pb.MoveRequest]) (*connect.Response[pb.MoveResponse], error) {
	ref := refFrom(ctx)
	src, err := fsv.userPath(ctx, req.Header(), req.Msg.GetSource())
	if err != nil {
		return nil, fsv.s.connectError(ctx, "Move", err)
	}
	dst, err := toSandbox(req.Msg.GetDestination())
	if err != nil {
		return nil, fsv.s.connectError(ctx, "Move", err)
	}
	e, err := fsv.s.cfg.Sessions.MoveFile(ctx, ref.tenant, ref.id, src, dst)
	if err != nil {
		return nil, fsv.s.connectError(ctx, "Move", err)
	}
	return connect.NewResponse(&pb.MoveResponse{Entry: entryInfo(fromSandbox(dst), e)}), nil
}

func (fsv filesystemService) Remove(ctx context.Context, req *connect.Request[pb.RemoveRequest]) (*connect.Response[pb.RemoveResponse], error) {
	ref := refFrom(ctx)
	p, err := fsv.userPath(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, fsv.s.connectError(ctx, "Remove", err)
	}
	if err := fsv.s.cfg.Sessions.RemoveAll(ctx, ref.tenant, ref.id, p); err != nil {
		return nil, fsv.s.connectError(ctx, "Remove", err)
	}
	return connect.NewResponse(&pb.RemoveResponse{}), nil
}

// ListDir lists a directory down to depth levels, breadth first, at most
// maxListEntries entries; symlinked directories are not entered.
func (fsv filesystemService) ListDir(ctx context.Context, req *connect.Request[pb.ListDirRequest]) (*connect.Response[pb.ListDirResponse], error) {
	ref := refFrom(ctx)
	root, err := fsv.userPath(ctx, req.Header(), req.Msg.GetPath())
	if err != nil {
		return nil, fsv.s.connectError(ctx, "ListDir", err)
	}
	depth := int(req.Msg.GetDepth())
	if depth < 1 {
		depth = 1
	}
	depth = min(depth, maxListDepth)
	out := &pb.ListDirResponse{}
	level := []string{root}
	for d := 0; d < depth && len(level) > 0; d++ {
		var next []string
		for _, dir := range level {
			list, err := fsv.s.cfg.Sessions.ListFiles(ctx, ref.tenant, ref.id, dir)
			if err != nil {
				if d > 0 && airlock.ErrorCode(err) != airlock.EUNAVAILABLE && !sandboxGone(err) {
					continue // changed meanwhile
				}
				return nil, fsv.s.connectError(ctx, "ListDir", err)
			}
			for i := range list.Entries {
				e := &list.Entries[i]
				p := path.Join(dir, e.Name)
				out.Entries = append(out.Entries, entryInfo(fromSandbox(p), e))
				if len(out.Entries) >= maxListEntries {
					return connect.NewResponse(out), nil
				}
				if e.Type == "dir" {
					next = append(next, p)
				}
			}
		}
		level = next
	}
	return connect.NewResponse(out), nil
}

var errNoWatch = errors.New("watching directories is not supported by Airlock's sandboxes")

func (fsv filesystemService) WatchDir(context.Context, *connect.Request[pb.WatchDirRequest], *connect.ServerStream[pb.WatchDirResponse]) error {
	return connect.NewError(connect.CodeUnimplemented, errNoWatch)
}

func (fsv filesystemService) CreateWatcher(context.Context, *connect.Request[pb.CreateWatcherRequest]) (*connect.Response[pb.CreateWatcherResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNoWatch)
}

func (fsv filesystemService) GetWatcherEvents(context.Context, *connect.Request[pb.GetWatcherEventsRequest]) (*connect.Response[pb.GetWatcherEventsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNoWatch)
}

func (fsv filesystemService) RemoveWatcher(context.Context, *connect.Request[pb.RemoveWatcherRequest]) (*connect.Response[pb.RemoveWatcherResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errNoWatch)
}
