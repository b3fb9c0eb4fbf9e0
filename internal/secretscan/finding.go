package secretscan

import (
	"errors"
	"fmt"
	"strings"
)

// Rule names, as reported in findings and used in allow entries.
const (
	RulePrivateKey     = "private-key"
	RuleAWSAccessKey   = "aws-access-key"
	RuleGCPAccount     = "gcp-service-account"
	RuleAzureConn      = "azure-connection-string"
	RuleGitHubToken    = "github-token"
	RuleGitLabToken    = "gitlab-token"
	RuleSlackToken     = "slack-token"
	RuleStripeKey      = "stripe-key"
	RuleJWT            = "jwt"
	RuleAirlockAPIKey  = "airlock-api-key"
	RuleGenericSecret  = "generic-secret"
	RuleSecretVariable = "secret-variable"
	RuleHostSecret     = "host-secret"
)

// Finding is one credential found. It never holds the secret itself.
type Finding struct {
	Rule string `json:"rule"`
	// Where is the file (relative to the scanned tree, or as the caller
	// named the bytes) or "env NAME" for a variable.
	Where string `json:"where"`
	// Line is 1-based; 0 when the content is binary or the finding is a
	// variable. Offset is the byte offset of the match in the file.
	Line   int   `json:"line,omitempty"`
	Offset int64 `json:"offset"`
	// Excerpt is the match masked: only the parts that are no secret.
	Excerpt string `json:"excerpt"`
	// Allowed, when set, is the reason of the allow entry that matched:
	// the finding does not refuse anything but is still reported.
	Allowed string `json:"allowed,omitempty"`

	end int64 // end offset of the match, for dropping contained matches
}

// String is "where:line (offset N): rule: excerpt".
func (f Finding) String() string {
	loc := f.Where
	switch {
	case f.Line > 0:
		loc = fmt.Sprintf("%s:%d (offset %d)", f.Where, f.Line, f.Offset)
	case !strings.HasPrefix(f.Where, "env "):
		loc = fmt.Sprintf("%s (offset %d)", f.Where, f.Offset)
	}
	s := fmt.Sprintf("%s: %s: %s", loc, f.Rule, f.Excerpt)
	if f.Allowed != "" {
		s += " [allowed: " + f.Allowed + "]"
	}
	return s
}

// ErrFound is wrapped by every error that refuses something because it
// holds a credential.
var ErrFound = errors.New("holds a credential")

// FoundError lists the findings that refused Subject (an image, a
// snapshot, a spec). It is errors.Is ErrFound.
type FoundError struct {
	Subject  string
	Findings []Finding
}

// maxListed bounds the findings an error message lists.
const maxListed = 10

func (e *FoundError) Error() string {
	var b strings.Builder
	n := len(e.Findings)
	fmt.Fprintf(&b, "%s %s (%d finding", e.Subject, ErrFound, n)
	if n != 1 {
		b.WriteString("s")
	}
	b.WriteString(")")
	for i, f := range e.Findings {
		if i == maxListed {
			fmt.Fprintf(&b, "; and %d more", n-maxListed)
			break
		}
		b.WriteString("; ")
		b.WriteString(f.String())
	}
	return b.String()
}

func (e *FoundError) Unwrap() error { return ErrFound }

// Refusal returns a *FoundError for the findings of subject that are not
// allowed, or nil when there are none.
func Refusal(subject string, findings []Finding) error {
	var bad []Finding
	for _, f := range findings {
		if f.Allowed == "" {
			bad = append(bad, f)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &FoundError{Subject: subject, Findings: bad}
}

// mask returns prefix followed by a placeholder for n secret bytes.
func mask(prefix string, n int) string {
	return fmt.Sprintf("%s****(%d bytes)", printable(prefix), n)
}

// printable replaces control and non-ASCII bytes, so an excerpt cannot
// carry terminal escapes or binary noise into a log.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e {
			b.WriteByte('?')
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
