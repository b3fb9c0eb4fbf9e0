package qemu

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// FuzzQMPReply feeds arbitrary monitor output to the client: whatever
// QEMU says (it runs with the guest's input), a call returns, in time,
// without a panic.
func FuzzQMPReply(f *testing.F) {
	f.Add([]byte(`{"return": {}}` + "\n"))
	f.Add([]byte(`{"event": "STOP"}` + "\n" + `{"return": {"status": "paused"}}` + "\n"))
	f.Add([]byte(`{"error": {"class": "GenericError", "desc": "x"}}` + "\n"))
	f.Add([]byte(`{"return": null}` + "\n"))
	f.Add([]byte("\n\n{\n"))
	f.Fuzz(func(t *testing.T, reply []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			defer b.Close()
			bufio.NewReader(b).ReadString('\n') // the command
			b.Write(reply)
		}()
		q := &qmp{conn: a, r: bufio.NewReaderSize(a, maxQMPLine)}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		var v any
		q.Execute(ctx, "query-status", nil, &v)
	})
}
