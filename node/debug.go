package node

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"
)

// errDebugExposed refuses profiles on an address beyond loopback without
// a key: they show the process's memory (heap profiles hold whatever was
// allocated there) and let anyone who reaches them load the CPU.
var errDebugExposed = errors.New("--debug-listen beyond loopback needs --metrics-key (the profiles then require it as a bearer key); listen on 127.0.0.1 or ::1 otherwise")

// serveDebug serves Go's profiles (CPU, heap, goroutines) on their own
// listener, never on the API's. On a loopback address they are open; on
// any other address only with metricsKey, which every request must then
// carry (Authorization: Bearer <key>), and without one it refuses to
// start. It returns the listener's address and a function that stops it.
func serveDebug(addr, metricsKey string, logger *slog.Logger) (net.Addr, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	loopback := loopbackOnly(ln.Addr())
	if !loopback && metricsKey == "" {
		ln.Close()
		return nil, nil, errDebugExposed
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var h http.Handler = mux
	if !loopback {
		h = requireKey(metricsKey, mux)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving profiles", "addr", ln.Addr().String(), "key_required", !loopback)
	go srv.Serve(ln)
	return ln.Addr(), func() { srv.Close() }, nil
}

// requireKey answers 401 to a request without Authorization: Bearer key.
func requireKey(key string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="airlock-debug"`)
			http.Error(w, "the profiles need Authorization: Bearer <the metrics key>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
