package gvisor

import (
	"context"
	"sync"
	"time"
)

// deleteBatch is how long the deleter gathers containers before one
// `runsc delete` removes them all, and deleteMax how many at most.
const (
	deleteBatch = 20 * time.Millisecond
	deleteMax   = 32
)

// deleter removes the records runsc keeps of ended containers, many at a
// time: every runsc command costs a process start of a large binary, and
// under load the destroys of a whole batch share one.
type deleter struct {
	b       *Backend
	mu      sync.Mutex
	pending []deleteReq
	timer   *time.Timer
}

type deleteReq struct {
	id   string
	done chan error
}

// delete removes container id from runsc's records and waits for it; a
// container runsc does not know is no error.
func (d *deleter) delete(ctx context.Context, id string) error {
	req := deleteReq{id: id, done: make(chan error, 1)}
	d.mu.Lock()
	d.pending = append(d.pending, req)
	switch {
	case len(d.pending) >= deleteMax:
		batch := d.pending
		d.pending = nil
		if d.timer != nil {
			d.timer.Stop()
			d.timer = nil
		}
		d.mu.Unlock()
		go d.run(batch)
	case d.timer == nil:
		d.timer = time.AfterFunc(deleteBatch, d.flush)
		d.mu.Unlock()
	default:
		d.mu.Unlock()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *deleter) flush() {
	d.mu.Lock()
	batch := d.pending
	d.pending = nil
	d.timer = nil
	d.mu.Unlock()
	if len(batch) > 0 {
		d.run(batch)
	}
}

// run deletes a batch with one command. runsc stops at the first
// container it does not know, and fails the command at one it cannot
// delete: so only containers it has a record of go in, and any whose
// record is still there afterwards is deleted on its own, so that every
// caller gets its own answer.
func (d *deleter) run(batch []deleteReq) {
	ctx := context.Background()
	args := []string{"delete", "--force"}
	var known []deleteReq
	for _, r := range batch {
		if d.b.hasRecord(r.id) {
			args = append(args, r.id)
			known = append(known, r)
		} else {
			r.done <- nil
		}
	}
	if len(known) == 0 {
		return
	}
	_, err := d.b.runsc(ctx, args...)
	for _, r := range known {
		if !d.b.hasRecord(r.id) {
			r.done <- nil
			continue
		}
		if len(known) == 1 {
			r.done <- err
			continue
		}
		_, err := d.b.runsc(ctx, "delete", "--force", r.id)
		r.done <- err
	}
}
