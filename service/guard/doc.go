// Package guard is the static check of code before it runs: it parses the
// code of a run (a one-shot execution, a session's exec or a cell) with a
// real parser for its language, walks the syntax tree, and returns
// findings (airlock.GuardFinding: rule, severity, line, column, excerpt,
// message). It is defence in depth: the sandbox stays the boundary, and
// code the guard passes is no safer for it.
//
// It owns the rules (rules.go) and the parsers' use; it does no I/O, keeps
// no state between checks and decides nothing: package run calls it for
// every run (run.Runner.Screen) and applies the tenant's policy (off,
// warn, block). It must not touch sandboxes, the store or the network.
//
// # Parsers
//
//   - Shell (bash, a session's shell and argv, and shell found in other
//     languages): mvdan.cc/sh/v3/syntax in bash mode, with error recovery.
//     Literal words are resolved (quotes and escapes), wrappers are looked
//     through (sudo, env, nohup, timeout, nice, xargs ...), and literal
//     code given to bash -c, sh -c, su -c, eval, python -c and node -e is
//     parsed again, to depth Config.MaxDepth.
//   - Python: tree-sitter (github.com/tree-sitter/go-tree-sitter) with the
//     tree-sitter-python grammar, which covers Python 3.11's syntax
//     (f-strings, the walrus, match, except*, type unions). The rules'
//     nodes are picked by a tree-sitter query, so the walk stays in C.
//     Literal strings and lists given to os.system, os.popen, subprocess.*
//     (with or without shell=True), os.exec*/spawn*, pty.spawn and
//     asyncio's subprocesses are parsed as shell.
//   - JavaScript: github.com/tdewolff/parse/v2/js, a pure-Go ECMAScript
//     parser (ES2020 and later: modules, arrow functions, template
//     literals, classes with private fields, async/await and for await,
//     optional chaining). tree-sitter-javascript is not offered as a Go
//     module, and goja's parser (github.com/dop251/goja/parser) refused
//     for await and import/export when tried. child_process bound by
//     require or import is followed; literal commands of exec/execSync
//     are parsed as shell, spawn/execFile's program and literal arguments
//     as an argv. Positions come from the parser's slices of the source.
//   - SQL (the sql language runs `sqlite3 -bail -header -column
//     /workspace/db.sqlite` on the code): the script is read the way the
//     sqlite3 shell reads it. A line that starts with '.' where no
//     statement is open is a dot-command, checked by name (with the
//     shell's prefix abbreviations, .sh for .shell) and its arguments
//     split as the shell splits them; .shell and .system, and a '|' in
//     .output, .once, .import or .read, are shell commands and parsed as
//     shell too. The rest is split into statements and tokens by SQLite's
//     lexical rules (strings, quoted identifiers, comments, the
//     semicolons inside CREATE TRIGGER ... END). A statement whose tokens
//     hold ATTACH or load_extension is then prepared, never stepped, by
//     SQLite itself (modernc.org/sqlite's transpiled C, in an empty
//     in-memory database per check) with an authorizer that notes
//     SQLITE_ATTACH and SQLITE_FUNCTION load_extension: where it
//     prepares, SQLite's parser decides. A statement that needs a table
//     an earlier statement makes does not prepare in an empty database
//     (prepare resolves names), and a trigger's body is not compiled
//     until it fires; for those the tokens decide: ATTACH as a
//     statement's first keyword (after EXPLAIN), load_extension as a name
//     followed by '('. modernc.org/sqlite exposes no tokenizer of its
//     own, so the lexer is ours. github.com/rqlite/sql, a Go parser of
//     SQLite's dialect, is not offered by the module proxy.
//
// # Why tree-sitter for Python
//
// The candidates were a pure-Go parser (none handles 3.11:
// go-python/gpython parses the 3.4 grammar), the image's own ast module
// run in the fresh sandbox before the program, and tree-sitter (cgo).
// Measured (BENCHMARKS.md, "Guard (issue 11)"), on the README's chart
// example: tree-sitter in airlockd 0.15 ms per check at p50; ast in the
// sandbox 83 ms per run at p50 (a python3 start inside gVisor, 61 ms more
// than an exec of true), on top of the run. ast in the sandbox also needs
// a sandbox before a block decision, so a refused run would still take
// one (from the pool or a boot), and it trusts a process in the sandbox
// to report on the code. tree-sitter costs cgo: airlockd is built with
// CGO_ENABLED=1 (scripts/setup.sh; gcc is installed there), while the
// agent, which must stay static, and the CLI do not import this package.
// A build without cgo still compiles (python_nocgo.go) and says in a
// finding of severity info that Python was not checked. On a megabyte of
// Python the two cost about the same (1.8 s for tree-sitter, 1.6 s for
// ast in the sandbox, p50 on a loaded 2-core machine: tree-sitter's
// allocations go through Go callbacks); Config.Timeout leaves room for
// that.
//
// # Bounds
//
// Code over Config.MaxBytes is not parsed (finding guard-limit); a check
// runs under a deadline (Config.Timeout, finding guard-timeout: the
// parsers and walks stop at it; tree-sitter through its progress
// callback); the code being checked at once is bounded
// (Config.MaxInflightBytes: a megabyte took about 80 MB in tree-sitter's
// Python tree, 45 MB in mvdan.cc/sh's, 25 MB in the JavaScript parser's,
// under 1 MB for SQL), and a check that finds no room in its time is a
// guard-timeout; findings are capped (Config.MaxFindings, then
// guard-limit, and the check ends);
// excerpts are at most airlock.MaxExcerptBytes; shell and JavaScript
// nested deeper than 2000 levels (brackets; for shell also if, while,
// for, case ... against fi, done, esac) are not given to their
// recursive parsers (guard-limit); a parser's panic becomes a finding
// guard-parse-error. Both bound findings are severity high: under the
// block policy, code made to exhaust the guard is refused, not passed.
// Code that does not parse gets guard-parse-error (info): what parsed is
// still checked, and it never blocks.
package guard
