package guard

import "github.com/airlockhq/airlock"

// Rules. Each finding names one; Severity says how bad each is.
const (
	RuleForkBomb     = "fork-bomb"         // a function or loop that forks itself without end
	RuleReverseShell = "reverse-shell"     // a shell wired to a network connection
	RuleDownloadExec = "download-exec"     // code fetched from the network and run
	RuleMiner        = "miner"             // a cryptocurrency miner run as a command
	RuleMiningPool   = "mining-pool"       // a stratum URL in code that connects
	RuleEscapeProbe  = "escape-probe"      // mount, nsenter, unshare, host paths, cgroup writes
	RuleSQLAttach    = "sql-attach"        // ATTACH DATABASE
	RuleSQLExtension = "sql-extension"     // load_extension() or .load
	RuleSQLShell     = "sql-shell"         // .shell, .system, or a pipe in .output/.once/.import
	RuleSQLFile      = "sql-file"          // a dot-command that reads or writes another file
	RuleTimeout      = "guard-timeout"     // the check ran out of time
	RuleLimit        = "guard-limit"       // the code or the findings were too large
	RuleParseError   = "guard-parse-error" // part of the code did not parse
)

// Severity is the severity of each rule.
var Severity = map[string]string{
	RuleForkBomb:     airlock.SeverityCritical,
	RuleReverseShell: airlock.SeverityCritical,
	RuleDownloadExec: airlock.SeverityCritical,
	RuleMiner:        airlock.SeverityCritical,
	RuleMiningPool:   airlock.SeverityHigh,
	RuleEscapeProbe:  airlock.SeverityHigh,
	RuleSQLAttach:    airlock.SeverityHigh,
	RuleSQLExtension: airlock.SeverityHigh,
	RuleSQLShell:     airlock.SeverityCritical,
	RuleSQLFile:      airlock.SeverityWarning,
	// A bound that is hit blocks under the block policy: code made to
	// exhaust the guard must not pass for clean.
	RuleTimeout:    airlock.SeverityHigh,
	RuleLimit:      airlock.SeverityHigh,
	RuleParseError: airlock.SeverityInfo,
}

// Rules lists the rules in a stable order.
var Rules = []string{
	RuleForkBomb, RuleReverseShell, RuleDownloadExec, RuleMiner, RuleMiningPool, RuleEscapeProbe,
	RuleSQLAttach, RuleSQLExtension, RuleSQLShell, RuleSQLFile, RuleTimeout, RuleLimit, RuleParseError,
}
