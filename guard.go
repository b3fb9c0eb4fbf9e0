package airlock

import "fmt"

// GuardPolicy is what a tenant's guard does with what it finds in code
// before it runs (see package guard).
type GuardPolicy string

const (
	// GuardOff does not check the tenant's code.
	GuardOff GuardPolicy = "off"
	// GuardWarn runs the code and reports the findings with the result
	// (the default).
	GuardWarn GuardPolicy = "warn"
	// GuardBlock refuses code with a finding that blocks (severity high
	// or critical) with a 422 problem guard-blocked: nothing runs.
	GuardBlock GuardPolicy = "block"
)

// GuardPolicies lists the policies in a stable order.
var GuardPolicies = []GuardPolicy{GuardOff, GuardWarn, GuardBlock}

// Effective is the policy in force: "" (never set) is GuardWarn.
func (p GuardPolicy) Effective() GuardPolicy {
	if p == "" {
		return GuardWarn
	}
	return p
}

// ParseGuardPolicy checks a policy's name ("" is not one).
func ParseGuardPolicy(s string) (GuardPolicy, error) {
	for _, p := range GuardPolicies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", Problem(EINVALID, "invalid-guard-policy", "guard policy %q is not one of off, warn, block", s)
}

// Severities of guard findings, from least to most.
const (
	SeverityInfo     = "info"     // said for the record: the guard could not look at all of the code
	SeverityWarning  = "warning"  // worth a look, never blocks
	SeverityHigh     = "high"     // blocks under GuardBlock
	SeverityCritical = "critical" // blocks under GuardBlock
)

// MaxExcerptBytes bounds the excerpt of a finding.
const MaxExcerptBytes = 120

// GuardFinding is one thing the guard found in code: which rule, how
// bad, where (1-based line and column, in bytes, of the code as sent;
// shell found inside a string of Python or JavaScript, or inside
// bash -c '...', is reported where that string is) and the line it is on
// (at most MaxExcerptBytes).
type GuardFinding struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
	Excerpt  string `json:"excerpt"`
	Message  string `json:"message"`
}

// Blocks reports whether the finding refuses the code under GuardBlock.
func (f GuardFinding) Blocks() bool {
	return f.Severity == SeverityHigh || f.Severity == SeverityCritical
}

func (f GuardFinding) String() string {
	return fmt.Sprintf("%d:%d %s (%s): %s", f.Line, f.Column, f.Rule, f.Severity, f.Message)
}

// ProblemGuardBlocked is the problem type of code the guard refused.
const ProblemGuardBlocked = "guard-blocked"

// GuardRefusal says why the guard refused code: the findings that block,
// and the execution recorded (status blocked) for the refusal.
type GuardRefusal struct {
	Findings    []GuardFinding
	ExecutionID string
}
