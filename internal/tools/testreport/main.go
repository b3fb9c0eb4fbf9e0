// Command testreport reads `go test -json` on stdin and prints what a
// plain `go test` prints (each package's ok or FAIL line, and the output
// of failing tests), then the slowest packages and tests, so that a CI
// log shows where the time goes and the next growth is visible.
//
//	go test -json ./... 2>&1 | go run ./internal/tools/testreport [-top N] [-json FILE]
//
// Lines that are not JSON events (a build's stderr) are printed as they
// come. It exits 0 whatever the tests did: the caller takes go test's
// exit status (set -o pipefail).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	top := flag.Int("top", 20, "how many of the slowest tests and packages to list")
	raw := flag.String("json", "", "also write the events, as read, to this file")
	flag.Parse()
	var in io.Reader = os.Stdin
	if *raw != "" {
		f, err := os.Create(*raw)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = io.TeeReader(os.Stdin, f)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	r := newReport(out)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		r.line(sc.Bytes())
		out.Flush()
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testreport: reading input:", err)
	}
	r.summary(*top)
}
