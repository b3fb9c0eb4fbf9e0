package main

import (
	"context"
	"flag"
)

// pageFlags are the paging flags of a listing the API pages by cursor:
// --limit, --before and --all.
type pageFlags struct {
	limit  int
	before string
	all    bool
}

func (p *pageFlags) register(fs *flag.FlagSet, defaultLimit int) {
	fs.IntVar(&p.limit, "limit", defaultLimit, "")
	fs.StringVar(&p.before, "before", "", "")
	fs.BoolVar(&p.all, "all", false, "")
}

// check validates the flags for command cmd.
func (p *pageFlags) check(cmd string) error {
	if p.limit < 1 || p.limit > 500 {
		return errUsage(cmd, "--limit must be from 1 to 500")
	}
	return nil
}

// follow reads the first page, and with --all every page after it,
// calling fetch for each (fetch keeps what it read and returns the next
// cursor); it returns the cursor after the last page read.
func (p *pageFlags) follow(ctx context.Context, fetch func(ctx context.Context, limit int, before string) (next string, err error)) (string, error) {
	before := p.before
	for {
		next, err := fetch(ctx, p.limit, before)
		if err != nil || !p.all || next == "" {
			return next, err
		}
		before = next
	}
}
