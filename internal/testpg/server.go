package testpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// BinDirEnv names a directory holding initdb and postgres, used before
// anything else.
const BinDirEnv = "AIRLOCK_TEST_PGBIN"

// port is the port number in the socket's name (.s.PGSQL.<port>); the
// server listens on no TCP port.
const port = 5432

// BinDir returns the directory of PostgreSQL's server binaries: $BinDirEnv
// if set, else the newest /usr/lib/postgresql/<major>/bin (Debian's
// layout), else the directory of an initdb on PATH that has a postgres
// beside it.
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, checkBinDir(d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, d := range dirs {
		if checkBinDir(d) == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if d := filepath.Dir(p); checkBinDir(d) == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL's server binaries (initdb, postgres) were not found: install Debian's postgresql package or set " + BinDirEnv)
}

func major(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func checkBinDir(d string) error {
	for _, b := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(d, b)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("no executable %s in %s", b, d)
		}
	}
	return nil
}

// Server is one running throwaway PostgreSQL server.
type Server struct {
	dir    string // owns data/, the socket and server.log
	socket string // the directory of the unix socket
	bin    string
	cred   *syscall.Credential
	cmd    *exec.Cmd     // nil when not running
	exited chan struct{} // closed when cmd has exited
	err    error         // of cmd.Wait, once exited is closed
}

// Start makes a new cluster in a new temporary directory and starts a
// server on it, listening on a unix socket in that directory only. The
// caller must Stop it.
func Start(ctx context.Context) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "airlock-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, socket: dir}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Env = serverEnv()
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	s.bin, s.cred = bin, cred
	if err := s.launch(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// launch starts the server process on the cluster and waits until it
// accepts connections.
func (s *Server) launch(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// fsync is off (a test's server never outlives a crash of the
	// machine), but commits are synchronous: what a store acknowledged
	// is in the kernel's page cache and survives the server's processes
	// being killed.
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-k", s.socket, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=",
		"-c", "max_connections=400",
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// The parent death signal is sent when the thread that started
		// the server ends: keep this one until the server has exited.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.err = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	s.cmd, s.exited = cmd, exited
	return s.waitReady(ctx, 30*time.Second)
}

// Kill ends every process of the server at once with SIGKILL, as a
// crash would, keeping its directory for Restart. PostgreSQL's children
// each run in a session of their own, so they are found by their parent:
// the postmaster is stopped first (it forks no more), then it and its
// children are killed, and Kill returns once none of them is left.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	pm := s.cmd.Process.Pid
	syscall.Kill(pm, syscall.SIGSTOP)
	kids := children(pm)
	for _, pid := range kids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	syscall.Kill(-pm, syscall.SIGKILL)
	syscall.Kill(pm, syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
	testreq.Poll(30*time.Second, func() bool {
		for _, pid := range kids {
			if alive(pid) {
				return false
			}
		}
		return true
	})
}

// children returns the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(n); ok && st.ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	st, ok := procStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

type stat struct {
	state byte
	ppid  int
}

// procStat reads the state and parent of a process from /proc.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return stat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return stat{}, false
	}
	return stat{state: f[0][0], ppid: ppid}, true
}

// Restart starts the server again on its cluster after Kill (it runs
// crash recovery).
func (s *Server) Restart(ctx context.Context) error {
	if s.cmd != nil {
		return errors.New("testpg: the server is running")
	}
	return s.launch(ctx)
}

// serverUser returns the credentials to run the server with: the
// postgres system user when running as root (the server refuses root),
// nil (this process's user) otherwise.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// serverEnv is the server's environment: a clean one, with no PG*
// variables of the test's to reach it.
func serverEnv() []string {
	return []string{"PATH=/usr/bin:/bin", "LANG=C", "LC_ALL=C", "TZ=UTC"}
}

// waitReady polls until the server accepts a connection, it exits, or
// the timeout passes.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		c, err := pgx.Connect(cctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited at start: %v\n%s", s.err, s.Log())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %v: %v\n%s", timeout, err, s.Log())
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// Log returns the server's log so far (for a failure's message).
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	return string(bytes.TrimSpace(b))
}

// Dir is the server's directory (its socket is in it).
func (s *Server) Dir() string { return s.dir }

// DSN returns a connection string for the database on the server, as
// the postgres superuser over the unix socket.
func (s *Server) DSN(database string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", s.socket, port, database)
}

// URL returns the connection URL of the database, for a command line
// flag that takes postgres:// URLs.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", database, s.socket, port)
}

// CreateDatabase creates an empty database.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()+` TEMPLATE template0`)
}

// DropDatabase drops a database, ending its connections first.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
}

func (s *Server) admin(ctx context.Context, stmt string) error {
	c, err := pgconn.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))
	_, err = c.Exec(ctx, stmt).ReadAll()
	return err
}

// removeSharedMemory removes the System V shared memory segment a
// killed server left (a clean stop removes its own): postmaster.pid's
// seventh line holds its key and ID.
func (s *Server) removeSharedMemory() error {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return nil // stopped cleanly, or never started
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return nil
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return nil
	}
	id, err := strconv.Atoi(f[1])
	if err != nil {
		return nil
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
		return fmt.Errorf("testpg: remove the killed server's shared memory %d: %w", id, err)
	}
	return nil
}

// Stop ends the server (fast shutdown; SIGKILL to its process group
// after 30 s) and removes its directory. It is safe to call twice.
func (s *Server) Stop() error {
	var errs []error
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
			errs = append(errs, errors.New("postgres did not stop within 30s of SIGINT; killed"))
		}
		s.cmd = nil
	}
	if s.dir != "" {
		errs = append(errs, s.removeSharedMemory())
		errs = append(errs, os.RemoveAll(s.dir))
		s.dir = ""
	}
	return errors.Join(errs...)
}
