package main

import (
	"context"
	"fmt"
	"time"
)

func runSessionMetrics(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("session metrics", sessionUsage, std.err)
	var srv serverFlags
	var out outputFlags
	var startS, endS string
	fs.StringVar(&startS, "start", "", "")
	fs.StringVar(&endS, "end", "", "")
	srv.register(fs)
	out.register(fs, true)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 1 {
		return usageError(std.err, "session metrics", "want one SESSION")
	}
	var start, end time.Time
	for _, p := range []struct {
		name, v string
		to      *time.Time
	}{{"--start", startS, &start}, {"--end", endS, &end}} {
		if p.v == "" {
			continue
		}
		if *p.to, err = time.Parse(time.RFC3339Nano, p.v); err != nil {
			return usageError(std.err, "session metrics", "%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z", p.name)
		}
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	m, err := c.SessionMetrics(ctx, pos[0], start, end)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	if out.json(std) {
		return writeJSON(std.out, m)
	}
	t := newTable(std.out, "AT", "CPU%", "MEMORY_MIB", "DISK_MIB", "NET_RX_BYTES", "NET_TX_BYTES")
	for _, s := range m.Samples {
		t.row(s.At.Local().Format(time.DateTime), fmt.Sprintf("%.1f", s.CPUPct), fmt.Sprintf("%.1f", float64(s.MemoryBytes)/(1<<20)),
			fmt.Sprintf("%.1f", float64(s.DiskBytes)/(1<<20)), s.NetRxBytes, s.NetTxBytes)
	}
	return t.flush()
}
