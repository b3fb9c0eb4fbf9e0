package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock/agent/protocol"
)

// The table keeps at most MaxRetained ended programs, dropping the
// oldest; running ones are never dropped; a reused PID replaces an ended
// program; the list is sorted, capped and leaves out reported programs.
func TestRetainedTableBounds(t *testing.T) {
	tab := newRetainedTable()
	now := time.Now()
	running := &program{pid: 1, started: now, retain: 1}
	tab.add(running)
	const n = protocol.MaxRetained + 6
	for i := range n {
		p := &program{pid: 100 + i, started: now.Add(time.Duration(i) * time.Millisecond), retain: 1, ended: true}
		tab.add(p)
		tab.ended(p)
	}
	if got := len(tab.m); got != protocol.MaxRetained+1 {
		t.Fatalf("%d programs kept, want %d", got, protocol.MaxRetained+1)
	}
	for i := range 6 {
		if tab.get(100+i) != nil {
			t.Errorf("oldest ended program %d kept", 100+i)
		}
	}
	if tab.get(1) != running || tab.get(100+n-1) == nil {
		t.Fatal("running or newest program dropped")
	}

	// A new program under the PID of an ended one replaces it.
	reused := &program{pid: 110, started: now.Add(time.Hour), retain: 1}
	tab.add(reused)
	if tab.get(110) != reused || len(tab.done) != protocol.MaxRetained-1 {
		t.Fatalf("reused pid: %p, %d ended", tab.get(110), len(tab.done))
	}
	// A reported program is left out of the list, then forgotten.
	last := tab.get(100 + n - 1)
	last.reported = true
	infos, more := tab.list()
	if more || len(infos) != protocol.MaxRetained || infos[0].PID != 1 || infos[len(infos)-1].PID != 110 {
		t.Fatalf("list of %d: first %+v last %+v", len(infos), infos[0], infos[len(infos)-1])
	}
	for i := 1; i < len(infos); i++ {
		if infos[i].StartedAtMS < infos[i-1].StartedAtMS {
			t.Fatal("list not sorted by start")
		}
	}
	tab.remove(last)
	if tab.get(last.pid) != nil || len(tab.done) != protocol.MaxRetained-2 {
		t.Fatal("remove left the program")
	}
	// An ended call for a program already removed does nothing.
	tab.ended(last)
	if tab.get(last.pid) != nil || len(tab.done) != protocol.MaxRetained-2 {
		t.Fatal("ended revived a removed program")
	}

	// The list is capped, in entries and in its encoded size.
	big := newRetainedTable()
	for i := range protocol.MaxProcessList + 10 {
		big.add(&program{pid: i + 1, started: now, retain: 1})
	}
	if got, more := big.list(); len(got) != protocol.MaxProcessList || !more {
		t.Fatalf("list of %d entries, more %v", len(got), more)
	}
	wide := newRetainedTable()
	for i := range protocol.MaxProcessList {
		p := &program{pid: i + 1, started: now}
		p.take(&protocol.ExecRequest{Argv: []string{strings.Repeat("\x01", 1000)}, RetainBytes: 1})
		wide.add(p)
	}
	got, more := wide.list()
	b := protocol.Encode(protocol.Response{Processes: got, More: more})
	if !more || len(got) == 0 || len(b) > protocol.MaxPayload {
		t.Fatalf("list of %d wide entries, more %v, %d bytes encoded", len(got), more, len(b))
	}
	var r protocol.Response
	if err := protocol.Decode(b, &r); err != nil || len(r.Processes[0].Argv0) != protocol.MaxNameBytes {
		t.Fatalf("the host refuses the list: %v", err)
	}
}
