package secretscan

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// match is what a rule found: the bytes w[start:end] of the window, and
// the masked excerpt shown instead of them.
type match struct {
	start, end int
	excerpt    string
}

// rule is one pattern. Each occurrence of a trigger (a literal, compared
// ignoring ASCII case when fold is set) is handed to check, which looks
// around it in the window w (at least ctxBytes either side of i when the
// file has them) and reports a match or nothing.
type rule struct {
	name     string
	triggers []string
	fold     bool
	textOnly bool // only in text: files without NUL bytes, variables
	check    func(w []byte, i int, trigger string) (match, bool)
}

// ctxBytes is how far a rule may look behind and ahead of its trigger.
const ctxBytes = 16 << 10

// rules are the pattern rules, in the order their findings are listed.
var rules = []*rule{
	{name: RulePrivateKey, triggers: []string{"-----BEGIN "}, check: checkPEM},
	{name: RulePrivateKey, triggers: []string{"PuTTY-User-Key-File-"}, check: checkPuTTY},
	{name: RuleAWSAccessKey, triggers: []string{"AKIA", "ASIA", "ABIA", "ACCA"}, check: checkAWS},
	{name: RuleGCPAccount, triggers: []string{`"private_key"`}, check: checkGCP},
	{name: RuleAzureConn, triggers: []string{"AccountKey=", "SharedAccessKey="}, check: checkAzure},
	{name: RuleGitHubToken, triggers: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, check: tokenCheck(isAlnum, 36, 36)},
	{name: RuleGitHubToken, triggers: []string{"github_pat_"}, check: tokenCheck(isWord, 80, 100)},
	{name: RuleGitLabToken, triggers: []string{"glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-"}, check: tokenCheck(isTokenByte, 20, 80)},
	{name: RuleSlackToken, triggers: []string{"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe-", "xapp-"}, check: tokenCheck(isDashAlnum, 20, 250)},
	{name: RuleSlackToken, triggers: []string{"hooks.slack.com/services/"}, check: checkSlackHook},
	{name: RuleStripeKey, triggers: []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"}, check: tokenCheck(isAlnum, 24, 255)},
	{name: RuleJWT, triggers: []string{"eyJ"}, check: checkJWT},
	{name: RuleAirlockAPIKey, triggers: []string{"alk_"}, check: checkAirlockKey},
	{name: RuleAirlockAPIKey, triggers: []string{"e2b_"}, check: checkE2BKey},
	{name: RuleGenericSecret, fold: true, textOnly: true, check: checkAssignment, triggers: assignmentTriggers},
}

// assignmentTriggers locate the names checkAssignment looks at.
var assignmentTriggers = []string{
	"secret", "token", "passw", "pwd", "apikey", "api_key", "api-key", "accesskey", "access_key",
	"privatekey", "private_key", "authkey", "auth_key", "credential", "passphrase",
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isWord(c byte) bool { return isAlnum(c) || c == '_' }
func isB64(c byte) bool  { return isAlnum(c) || c == '+' || c == '/' }

// isB64URL is the base64url alphabet (JWT segments).
func isB64URL(c byte) bool    { return isAlnum(c) || c == '-' || c == '_' }
func isTokenByte(c byte) bool { return isAlnum(c) || c == '-' || c == '_' || c == '.' }
func isDashAlnum(c byte) bool { return isAlnum(c) || c == '-' }
func isLowerB32(c byte) bool  { return c >= 'a' && c <= 'z' || c >= '2' && c <= '7' }
func isLowerHex(c byte) bool  { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }
func isUpperB32(c byte) bool  { return c >= 'A' && c <= 'Z' || c >= '2' && c <= '7' }
func isNameByte(c byte) bool  { return isWord(c) || c == '-' || c == '.' }
func isValueByte(c byte) bool {
	return isB64(c) || c == '=' || c == '_' || c == '-' || c == '.' || c == '~'
}
func isSpaceOrTab(c byte) bool { return c == ' ' || c == '\t' }

// run returns how many bytes from w[j] are in class, counting at most
// max+1 (so a caller can tell "more than max").
func run(w []byte, j int, class func(byte) bool, max int) int {
	n := 0
	for j+n < len(w) && n <= max && class(w[j+n]) {
		n++
	}
	return n
}

// boundary reports whether w[i] starts a token: the byte before is not in
// class.
func boundary(w []byte, i int, class func(byte) bool) bool {
	return i == 0 || !class(w[i-1])
}

// entropy is the Shannon entropy of s in bits per byte.
func entropy(s []byte) float64 {
	if len(s) == 0 {
		return 0
	}
	var counts [256]int
	for _, c := range s {
		counts[c]++
	}
	h := 0.0
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// placeholders are words that mark a value as an example, not a secret.
var placeholders = []string{"example", "xxxx", "changeme", "change_me", "placeholder", "your", "dummy", "sample", "redacted", "0000000", "1234567", "abcdef"}

func isPlaceholder(v []byte) bool {
	l := bytes.ToLower(v)
	for _, p := range placeholders {
		if bytes.Contains(l, []byte(p)) {
			return true
		}
	}
	return false
}

// random reports whether v looks randomly generated: at least two of
// lower case, upper case and digits, and at least minBits of entropy per
// byte, and no placeholder word.
func random(v []byte, minBits float64) bool {
	var lower, upper, digit bool
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= '0' && c <= '9':
			digit = true
		}
	}
	classes := 0
	for _, b := range []bool{lower, upper, digit} {
		if b {
			classes++
		}
	}
	return classes >= 2 && entropy(v) >= minBits && !isPlaceholder(v)
}

// tokenCheck is the check of a token made of a fixed prefix (the
// trigger) and a random tail of minLen to maxLen bytes of class.
func tokenCheck(class func(byte) bool, minLen, maxLen int) func(w []byte, i int, trigger string) (match, bool) {
	return func(w []byte, i int, trigger string) (match, bool) {
		if !boundary(w, i, isWord) {
			return match{}, false
		}
		j := i + len(trigger)
		n := run(w, j, class, maxLen)
		if n < minLen || n > maxLen {
			return match{}, false
		}
		tail := w[j : j+n]
		if !random(tail, 3.0) {
			return match{}, false
		}
		return match{start: i, end: j + n, excerpt: mask(trigger, len(trigger)+n)}, true
	}
}

// checkPEM matches a PEM block of a private key with a body: the BEGIN
// line, at least 64 base64 characters (optionally after RFC 1421
// headers; lines may be JSON-escaped) and the matching END line.
func checkPEM(w []byte, i int, trigger string) (match, bool) {
	j := i + len(trigger)
	lim := min(len(w), j+64)
	k := bytes.Index(w[j:lim], []byte("-----"))
	if k <= 0 {
		return match{}, false
	}
	label := string(w[j : j+k])
	if !strings.HasSuffix(label, "PRIVATE KEY") && label != "PGP PRIVATE KEY BLOCK" {
		return match{}, false
	}
	for _, c := range []byte(label) {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ' ') {
			return match{}, false
		}
	}
	j += k + 5
	end := bytes.Index(w[j:min(len(w), j+ctxBytes-128)], []byte("-----END "+label+"-----"))
	if end < 0 {
		return match{}, false
	}
	body := w[j : j+end]
	body = bytes.ReplaceAll(body, []byte(`\n`), []byte("\n"))
	body = bytes.ReplaceAll(body, []byte(`\r`), nil)
	n := 0
	for _, line := range bytes.Split(body, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if bytes.IndexByte(line, ':') > 0 { // a header: Proc-Type, DEK-Info, Comment
			continue
		}
		for _, c := range line {
			if !isB64(c) && c != '=' {
				return match{}, false
			}
		}
		n += len(line)
	}
	if n < 64 {
		return match{}, false
	}
	e := j + end + len("-----END "+label+"-----")
	return match{start: i, end: e, excerpt: mask("-----BEGIN "+label+"-----", e-i)}, true
}

// checkPuTTY matches a PuTTY private key file: its first line and a
// Private-Lines header after it.
func checkPuTTY(w []byte, i int, trigger string) (match, bool) {
	j := i + len(trigger)
	if j+2 >= len(w) || w[j] < '1' || w[j] > '9' || w[j+1] != ':' {
		return match{}, false
	}
	k := bytes.Index(w[j:min(len(w), j+ctxBytes-128)], []byte("\nPrivate-Lines: "))
	if k < 0 {
		return match{}, false
	}
	e := j + k + len("\nPrivate-Lines: ")
	return match{start: i, end: e, excerpt: mask(trigger+string(w[j:j+1]), e-i)}, true
}

// checkAWS matches an AWS access key ID with a secret access key (40
// base64 characters of mixed case and digits) within 1 KiB of it. AWS's
// documentation examples (with EXAMPLE in them) are not credentials.
func checkAWS(w []byte, i int, trigger string) (match, bool) {
	if !boundary(w, i, isAlnum) {
		return match{}, false
	}
	j := i + len(trigger)
	if run(w, j, isUpperB32, 16) != 16 || (j+16 < len(w) && isAlnum(w[j+16])) {
		return match{}, false
	}
	id := w[i : j+16]
	if bytes.Contains(id, []byte("EXAMPLE")) {
		return match{}, false
	}
	lo, hi := max(0, i-1024), min(len(w), j+16+1024)
	for k := lo; k < hi; k++ {
		if !isB64(w[k]) || !boundary(w, k, isB64) {
			continue
		}
		n := run(w, k, isB64, 40)
		if n == 40 && (k+40 >= len(w) || w[k+40] != '=') {
			v := w[k : k+40]
			if random(v, 4.0) && hasUpperLowerDigit(v) {
				// The match spans both, so an assignment of the secret
				// is not listed again as a generic one.
				return match{start: min(i, k), end: max(j+16, k+40), excerpt: mask(trigger, 20) + " with a secret access key nearby"}, true
			}
		}
		k += n
	}
	return match{}, false
}

func hasUpperLowerDigit(v []byte) bool {
	return bytes.ContainsFunc(v, func(r rune) bool { return r >= 'A' && r <= 'Z' }) &&
		bytes.ContainsFunc(v, func(r rune) bool { return r >= 'a' && r <= 'z' }) &&
		bytes.ContainsFunc(v, func(r rune) bool { return r >= '0' && r <= '9' })
}

// checkGCP matches the private key of a GCP service-account key file:
// "private_key": "-----BEGIN..." with "service_account" near it.
func checkGCP(w []byte, i int, trigger string) (match, bool) {
	j := i + len(trigger)
	for j < len(w) && isSpaceOrTab(w[j]) {
		j++
	}
	if j >= len(w) || w[j] != ':' {
		return match{}, false
	}
	j++
	for j < len(w) && isSpaceOrTab(w[j]) {
		j++
	}
	if !bytes.HasPrefix(w[j:], []byte(`"-----BEGIN `)) {
		return match{}, false
	}
	// The end of the JSON string.
	k := j + 1
	for k < len(w) && k < j+ctxBytes-128 && w[k] != '"' {
		if w[k] == '\\' {
			k++
		}
		k++
	}
	if k >= len(w) || w[k] != '"' || k-j < 100 {
		return match{}, false
	}
	around := w[max(0, i-8192):min(len(w), k+8192)]
	if !bytes.Contains(around, []byte(`"service_account"`)) {
		return match{}, false
	}
	return match{start: i, end: k + 1, excerpt: mask(`"private_key": "-----BEGIN `, k+1-i) + " in a service-account key"}, true
}

// checkAzure matches AccountKey= or SharedAccessKey= with a base64 value
// of at least 40 characters in a connection string (AccountName= or
// Endpoint= before it).
func checkAzure(w []byte, i int, trigger string) (match, bool) {
	j := i + len(trigger)
	n := run(w, j, func(c byte) bool { return isB64(c) || c == '=' }, 200)
	if n < 40 || n > 200 || !random(w[j:j+n], 4.0) {
		return match{}, false
	}
	before := w[max(0, i-512):i]
	if !bytes.Contains(before, []byte("AccountName=")) && !bytes.Contains(before, []byte("Endpoint=")) {
		return match{}, false
	}
	return match{start: i, end: j + n, excerpt: mask(trigger, len(trigger)+n)}, true
}

// checkSlackHook matches a Slack incoming-webhook URL's path.
func checkSlackHook(w []byte, i int, trigger string) (match, bool) {
	j := i + len(trigger)
	for part := 0; part < 3; part++ {
		n := run(w, j, isAlnum, 64)
		if n < 8 || n > 64 {
			return match{}, false
		}
		j += n
		if part < 2 {
			if j >= len(w) || w[j] != '/' {
				return match{}, false
			}
			j++
		}
	}
	if !random(w[i+len(trigger):j], 3.0) {
		return match{}, false
	}
	return match{start: i, end: j, excerpt: mask(trigger, j-i)}, true
}

// checkJWT matches header.payload.signature whose header decodes to a
// JSON object with an "alg".
func checkJWT(w []byte, i int, trigger string) (match, bool) {
	if !boundary(w, i, func(c byte) bool { return isB64URL(c) || c == '.' }) {
		return match{}, false
	}
	var seg [3][]byte
	j := i
	for s := 0; s < 3; s++ {
		n := run(w, j, isB64URL, 8192)
		if n > 8192 {
			return match{}, false
		}
		seg[s] = w[j : j+n]
		j += n
		if s < 2 {
			if j >= len(w) || w[j] != '.' {
				return match{}, false
			}
			j++
		}
	}
	if len(seg[0]) < 10 || len(seg[1]) < 10 || len(seg[2]) < 16 || !bytes.HasPrefix(seg[1], []byte("eyJ")) {
		return match{}, false
	}
	hdr, err := base64.RawURLEncoding.DecodeString(string(seg[0]))
	if err != nil {
		return match{}, false
	}
	var h map[string]any
	if json.Unmarshal(hdr, &h) != nil {
		return match{}, false
	}
	alg, ok := h["alg"].(string)
	if !ok || alg == "" || len(alg) > 16 {
		return match{}, false
	}
	return match{start: i, end: j, excerpt: fmt.Sprintf("JWT (alg %s) %s", printable(alg), mask("", j-i))}, true
}

// checkAirlockKey matches an Airlock API key: alk_ and 52 base32
// characters. The excerpt keeps the key's public prefix (alk_ and six
// characters), which `airlock key ls` shows too.
func checkAirlockKey(w []byte, i int, trigger string) (match, bool) {
	if !boundary(w, i, isWord) {
		return match{}, false
	}
	j := i + len(trigger)
	if run(w, j, isLowerB32, 52) != 52 || (j+52 < len(w) && isAlnum(w[j+52])) {
		return match{}, false
	}
	return match{start: i, end: j + 52, excerpt: mask(string(w[i:j+6]), 56)}, true
}

// checkE2BKey matches a key in the E2B format: e2b_ and 40 lower-case
// hex digits.
func checkE2BKey(w []byte, i int, trigger string) (match, bool) {
	if !boundary(w, i, isWord) {
		return match{}, false
	}
	j := i + len(trigger)
	if run(w, j, isLowerHex, 40) != 40 || (j+40 < len(w) && isAlnum(w[j+40])) || !random(w[j:j+40], 3.0) {
		return match{}, false
	}
	return match{start: i, end: j + 40, excerpt: mask(string(w[i:j+6]), 44)}, true
}

// secretSuffixes end the names (lower case, without separators) whose
// values are secrets.
var secretSuffixes = []string{
	"secret", "token", "password", "passwd", "pwd", "apikey", "accesskey", "secretkey",
	"privatekey", "authkey", "credential", "credentials", "passphrase",
}

// SecretName reports whether a variable or key name says it holds a
// secret: it ends in SECRET, TOKEN, PASSWORD, API_KEY, ACCESS_KEY and the
// like, whatever the case and separators (so GITHUB_TOKEN, apiKey and
// db.password do; TOKEN_FILE, password_hash and tokenize do not).
func SecretName(name string) bool { return secretName([]byte(name)) }

func secretName(name []byte) bool {
	for _, suf := range secretSuffixes {
		// Compare from the end, skipping separators, ignoring case.
		i, j := len(name)-1, len(suf)-1
		for i >= 0 && j >= 0 {
			c := name[i]
			if c == '_' || c == '-' || c == '.' {
				i--
				continue
			}
			if lowerTab[c] != suf[j] {
				break
			}
			i--
			j--
		}
		if j < 0 {
			return true
		}
	}
	return false
}

// checkAssignment matches NAME = VALUE (or NAME: VALUE, "name": "value",
// NAME := VALUE, NAME => VALUE) where SecretName(NAME) and VALUE is 16 to
// 256 token characters that look random. Only text is checked: in binary
// files names and values are fragments of other data.
func checkAssignment(w []byte, i int, trigger string) (match, bool) {
	s := i
	for s > 0 && i-s < 128 && isNameByte(w[s-1]) {
		s--
	}
	e := i
	for e < len(w) && e-s < 128 && isNameByte(w[e]) {
		e++
	}
	name := w[s:e]
	// A name with more than one trigger (secret_access_key) is matched
	// once: the scan drops an assignment that starts inside the last.
	if !secretName(name) {
		return match{}, false
	}
	j := e
	if j < len(w) && (w[j] == '"' || w[j] == '\'') && s > 0 && w[s-1] == w[j] {
		j++
	}
	for j < len(w) && isSpaceOrTab(w[j]) {
		j++
	}
	switch {
	case bytes.HasPrefix(w[j:], []byte(":=")), bytes.HasPrefix(w[j:], []byte("=>")), bytes.HasPrefix(w[j:], []byte("?=")):
		j += 2
	case bytes.HasPrefix(w[j:], []byte("==")):
		return match{}, false
	case j < len(w) && (w[j] == '=' || w[j] == ':'):
		j++
	default:
		return match{}, false
	}
	for j < len(w) && isSpaceOrTab(w[j]) {
		j++
	}
	var quote byte
	if j < len(w) && (w[j] == '"' || w[j] == '\'' || w[j] == '`') {
		quote = w[j]
		j++
	}
	n := run(w, j, isValueByte, 256)
	if n < 16 || n > 256 {
		return match{}, false
	}
	v := w[j : j+n]
	k := j + n
	if quote != 0 {
		if k >= len(w) || w[k] != quote {
			return match{}, false
		}
	} else if k < len(w) && !bytes.ContainsRune([]byte(" \t\r\n,;)]}"), rune(w[k])) {
		return match{}, false
	}
	if quote == 0 && dotted(v) {
		return match{}, false // a reference in code: exports.STRICT_TOKEN
	}
	if v[0] == '/' || v[0] == '.' || !random(v, 3.5) || !bytes.ContainsFunc(v, func(r rune) bool { return r >= '0' && r <= '9' }) {
		return match{}, false
	}
	return match{start: s, end: k, excerpt: printable(string(name)) + " = " + mask("", n)}, true
}

// dotted reports whether v is identifiers joined by dots (a.b, x2.CONST).
func dotted(v []byte) bool {
	parts := bytes.Split(v, []byte("."))
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if len(p) == 0 || !(p[0] == '_' || p[0] >= 'a' && p[0] <= 'z' || p[0] >= 'A' && p[0] <= 'Z') {
			return false
		}
		for _, c := range p {
			if !isWord(c) {
				return false
			}
		}
	}
	return true
}
