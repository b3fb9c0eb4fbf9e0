package e2b

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/airlockhq/airlock/api/e2b/internal/envdpb/filesystem/filesystemconnect"
	"github.com/airlockhq/airlock/api/e2b/internal/envdpb/process/processconnect"
)

// Bounds of the envd services.
const (
	maxRPCBytes       = 4 << 20          // one request message
	streamWriteTimout = 30 * time.Second // each write of a stream to its client
)

// envdHandler serves envd's paths: the two Connect services, /files and
// /health.
func (s *Server) envdHandler() http.Handler {
	opts := []connect.HandlerOption{
		connect.WithInterceptors(authInterceptor{s}),
		connect.WithReadMaxBytes(maxRPCBytes),
		connect.WithRecover(func(ctx context.Context, spec connect.Spec, _ http.Header, v any) error {
			s.log.Error("e2b: panic in an RPC", "procedure", spec.Procedure, "panic", v)
			return connect.NewError(connect.CodeInternal, errors.New("internal error"))
		}),
	}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(processService{s}, opts...))
	mux.Handle(filesystemconnect.NewFilesystemHandler(filesystemService{s}, opts...))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/process.Process/") || strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/"):
			// Streams may run for as long as their process: no overall
			// write deadline, a deadline for each write instead.
			mux.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w)}, r)
		case r.URL.Path == "/files" && r.Method == http.MethodGet:
			s.readFile(w, r)
		case r.URL.Path == "/files" && r.Method == http.MethodPost:
			s.writeFiles(w, r)
		case r.URL.Path == "/health" && r.Method == http.MethodGet:
			s.health(w, r, purposeEnvd)
		case r.URL.Path == "/files" || r.URL.Path == "/health":
			s.writeError(w, r, errorf(http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+" is not a call of envd"))
		default:
			s.writeError(w, r, errorf(http.StatusNotFound, "no such envd path: "+clip(r.URL.Path, 100)))
		}
	})
}

// authInterceptor opens every RPC with the sandbox's envd token.
type authInterceptor struct{ s *Server }

func (a authInterceptor) authorize(ctx context.Context, h http.Header, procedure string) (context.Context, error) {
	ref, err := a.s.authorize(ctx, h, purposeEnvd)
	if err != nil {
		return ctx, a.s.connectError(ctx, procedure, err)
	}
	if _, err := basicUser(h.Get("Authorization")); err != nil {
		return ctx, a.s.connectError(ctx, procedure, err)
	}
	return withRef(ctx, ref), nil
}

func (a authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := a.authorize(ctx, req.Header(), req.Spec().Procedure)
		if err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (a authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := a.authorize(ctx, conn.RequestHeader(), conn.Spec().Procedure)
		if err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

// deadlineWriter gives each write its own deadline, so a client that
// stops reading a stream ends it instead of holding it forever, and a
// stream that is read may run as long as its process.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.rc.SetWriteDeadline(time.Now().Add(streamWriteTimout))
	return d.ResponseWriter.Write(b)
}

func (d *deadlineWriter) WriteHeader(code int) {
	d.rc.SetWriteDeadline(time.Now().Add(streamWriteTimout))
	d.ResponseWriter.WriteHeader(code)
}

func (d *deadlineWriter) Flush() { d.rc.Flush() }

func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
