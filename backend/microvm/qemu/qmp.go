package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a client of QEMU's machine protocol over its unix socket: a
// greeting, then one JSON object per line each way. Commands are sent one
// at a time; events are read and dropped.
type qmp struct {
	mu   sync.Mutex // one command at a time
	conn net.Conn
	r    *bufio.Reader
}

// maxQMPLine bounds a line from QEMU (the VMM runs with the guest's
// input, so it is not trusted to be sane either).
const maxQMPLine = 64 << 10

func dialQMP(ctx context.Context, path string) (*qmp, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	q := &qmp{conn: conn, r: bufio.NewReaderSize(conn, maxQMPLine)}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if err := q.readLine(&greeting); err != nil || greeting.QMP == nil {
		conn.Close()
		return nil, fmt.Errorf("qmp greeting: %v", err)
	}
	conn.SetDeadline(time.Time{})
	if err := q.Execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmp) readLine(v any) error {
	line, err := q.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return fmt.Errorf("qmp: line over %d bytes", q.r.Size())
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// Execute runs a command and decodes its return value into result (if
// not nil).
func (q *qmp) Execute(ctx context.Context, cmd string, args any, result any) error {
	return q.execute(ctx, cmd, args, result, -1)
}

// ExecuteWithFD runs a command that takes a descriptor (getfd), sent
// with it over the socket.
func (q *qmp) ExecuteWithFD(ctx context.Context, cmd string, args any, fd int) error {
	if fd < 0 {
		return fmt.Errorf("qmp %s: no descriptor", cmd)
	}
	return q.execute(ctx, cmd, args, nil, fd)
}

func (q *qmp) execute(ctx context.Context, cmd string, args any, result any, fd int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(30 * time.Second)
	}
	q.conn.SetDeadline(dl)
	defer q.conn.SetDeadline(time.Time{})
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if fd >= 0 {
		uc, ok := q.conn.(*net.UnixConn)
		if !ok {
			return fmt.Errorf("qmp %s: descriptors need a unix socket", cmd)
		}
		if _, _, err := uc.WriteMsgUnix(append(b, '\n'), unix.UnixRights(fd), nil); err != nil {
			return fmt.Errorf("qmp %s: %w", cmd, err)
		}
	} else if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("qmp %s: %w", cmd, err)
	}
	for {
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := q.readLine(&resp); err != nil {
			return fmt.Errorf("qmp %s: %w", cmd, err)
		}
		switch {
		case resp.Event != "":
			continue
		case resp.Error != nil:
			return fmt.Errorf("qmp %s: %s: %s", cmd, resp.Error.Class, resp.Error.Desc)
		case resp.Return != nil:
			if result != nil {
				return json.Unmarshal(resp.Return, result)
			}
			return nil
		}
	}
}

func (q *qmp) Close() error { return q.conn.Close() }
