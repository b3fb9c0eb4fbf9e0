package oneshot

import "github.com/airlockhq/airlock"

// codeDir is where the code of a one-shot execution is put inside the
// sandbox: outside the workspace, so it is not an artifact.
const codeDir = "/tmp/.airlock"

// SQLDatabase is the database file the sql language runs against.
const SQLDatabase = "/workspace/db.sqlite"

// program returns the code file and argv that run code of a language.
func program(lang airlock.Language) (file string, argv []string) {
	switch lang {
	case airlock.Python:
		file = codeDir + "/main.py"
		return file, []string{"python3", file}
	case airlock.Bash:
		file = codeDir + "/main.sh"
		return file, []string{"bash", file}
	case airlock.Node:
		file = codeDir + "/main.js"
		return file, []string{"node", file}
	case airlock.SQL:
		file = codeDir + "/main.sql"
		return file, []string{"sqlite3", "-bail", "-header", "-column", SQLDatabase, ".read " + file}
	}
	return "", nil
}
