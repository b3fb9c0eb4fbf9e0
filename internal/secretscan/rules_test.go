package secretscan_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/internal/secretscan"
)

// The credentials below are made at test time from crypto/rand, so none
// is in the source and every run checks fresh ones.

const (
	alnum   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upperB  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	digits  = "0123456789"
	b64Alph = alnum + "+/"
)

func rnd(alphabet string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b.WriteByte(alphabet[k.Int64()])
	}
	return b.String()
}

func rndBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func pemKey(t *testing.T, typ string) string {
	t.Helper()
	var der []byte
	switch typ {
	case "RSA PRIVATE KEY":
		k, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			t.Fatal(err)
		}
		der = x509.MarshalPKCS1PrivateKey(k)
	case "EC PRIVATE KEY", "PRIVATE KEY":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if typ == "PRIVATE KEY" {
			der, err = x509.MarshalPKCS8PrivateKey(k)
		} else {
			der, err = x509.MarshalECPrivateKey(k)
		}
		if err != nil {
			t.Fatal(err)
		}
	default: // an opaque body, as in OpenSSH's format
		der = rndBytes(400)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

func jwt(header string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(`{"sub":"1234567890","iat":1516239022}`)) + "." + rnd(alnum+"-_", 43)
}

type ruleCase struct {
	name   string
	text   string
	rule   string // "" when nothing may be found
	secret string // a part of text no finding may show; default text
}

func ruleCases(t *testing.T) []ruleCase {
	awsID := "AKIA" + rnd(upperB, 16)
	awsSecret := rnd(alnum, 38) + "/+"
	gh := "ghp_" + rnd(alnum, 36)
	fineGrained := "github_pat_" + rnd(alnum, 22) + "_" + rnd(alnum, 59)
	gl := "glpat-" + rnd(alnum, 20)
	slack := "xoxb-" + rnd(digits, 12) + "-" + rnd(digits, 13) + "-" + rnd(alnum, 24)
	hook := "T" + rnd(upperB, 10) + "/B" + rnd(upperB, 10) + "/" + rnd(alnum, 24)
	stripe := "sk_live_" + rnd(alnum, 24)
	azureKey := base64.StdEncoding.EncodeToString(rndBytes(64))
	sbKey := base64.StdEncoding.EncodeToString(rndBytes(32))
	alk, _ := airlock.NewAPIKey("t", "k", time.Now())
	e2b, _ := airlock.NewE2BAPIKey("t", "k", time.Now())
	generic := rnd(alnum, 32)
	rsaPEM := pemKey(t, "RSA PRIVATE KEY")
	sa, _ := json.MarshalIndent(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": rnd("0123456789abcdef", 40),
		"private_key": pemKey(t, "PRIVATE KEY"), "client_email": "x@p.iam.gserviceaccount.com",
	}, "", "  ")
	var saKey map[string]string
	json.Unmarshal(sa, &saKey)
	tok := jwt(`{"alg":"HS256","typ":"JWT"}`)

	return []ruleCase{
		{"pem rsa", "key:\n" + rsaPEM, secretscan.RulePrivateKey, strings.Split(rsaPEM, "\n")[1]},
		{"pem ec", pemKey(t, "EC PRIVATE KEY"), secretscan.RulePrivateKey, ""},
		{"pem pkcs8", pemKey(t, "PRIVATE KEY"), secretscan.RulePrivateKey, ""},
		{"pem openssh", pemKey(t, "OPENSSH PRIVATE KEY"), secretscan.RulePrivateKey, ""},
		{"pem encrypted with headers", strings.Replace(pemKey(t, "RSA PRIVATE KEY"), "KEY-----\n", "KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\n", 1), secretscan.RulePrivateKey, ""},
		{"pem json-escaped", strings.ReplaceAll(pemKey(t, "PRIVATE KEY"), "\n", `\n`), secretscan.RulePrivateKey, ""},
		{"pem certificate", pemKey(t, "CERTIFICATE"), "", ""},
		{"pem public key", pemKey(t, "PUBLIC KEY"), "", ""},
		{"pem begin line in docs", "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----\n", "", ""},
		{"pem begin without end", "-----BEGIN PRIVATE KEY-----\n" + rnd(b64Alph, 200) + "\n", "", ""},
		{"putty", "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 2\nAAAA\nBBBB\nPrivate-Lines: 1\n" + rnd(b64Alph, 44) + "\n", secretscan.RulePrivateKey, ""},
		{"putty word", "PuTTY-User-Key-File-N is the first line of a key file", "", ""},

		{"aws id and secret", "[default]\naws_access_key_id = " + awsID + "\naws_secret_access_key = " + awsSecret + "\n", secretscan.RuleAWSAccessKey, awsSecret},
		{"aws id alone", "id " + awsID + " rotated", "", ""},
		{"aws documentation example", "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", ""},
		{"aws id with a sha1 nearby", awsID + " " + rnd("0123456789abcdef", 40), "", ""},
		{"aws inside a word", "XAKIA" + rnd(upperB, 16) + " " + awsSecret, "", ""},

		{"gcp service account", string(sa), secretscan.RuleGCPAccount, strings.Split(saKey["private_key"], "\n")[1]},
		{"gcp without a key", `{"type": "service_account", "private_key": ""}`, "", ""},

		{"azure storage", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + azureKey + ";EndpointSuffix=core.windows.net", secretscan.RuleAzureConn, azureKey},
		{"azure service bus", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=" + sbKey, secretscan.RuleAzureConn, sbKey},
		{"azure key out of context", "AccountKey=" + azureKey, "", ""},
		{"azure short key", "AccountName=a;AccountKey=abc123==", "", ""},

		{"github classic", "token " + gh, secretscan.RuleGitHubToken, gh[4:]},
		{"github fine-grained", fineGrained, secretscan.RuleGitHubToken, fineGrained[11:]},
		{"github placeholder", "ghp_" + strings.Repeat("x", 36), "", ""},
		{"github too short", "ghp_" + rnd(alnum, 35), "", ""},
		{"github inside a word", "xghp_" + rnd(alnum, 36), "", ""},

		{"gitlab", "CI_TOKEN: " + gl, secretscan.RuleGitLabToken, gl[6:]},
		{"gitlab placeholder", "glpat-xxxxxxxxxxxxxxxxxxxx", "", ""},

		{"slack bot token", slack, secretscan.RuleSlackToken, slack[5:]},
		{"slack webhook", "https://hooks.slack.com/services/" + hook, secretscan.RuleSlackToken, hook},
		{"slack words", "xoxb-not-a-real-token-at-all", "", ""},

		{"stripe secret key", "stripe.api_key = '" + stripe + "'", secretscan.RuleStripeKey, stripe[8:]},
		{"stripe publishable key", "pk_live_" + rnd(alnum, 24), "", ""},
		{"stripe placeholder", "sk_live_" + strings.Repeat("x", 24), "", ""},

		{"jwt", "Authorization: Bearer " + tok, secretscan.RuleJWT, tok},
		{"jwt without alg", jwt(`{"typ":"JWT"}`), "", ""},
		{"jwt-like base64", "eyJ" + rnd(alnum, 20) + ".eyJ" + rnd(alnum, 20) + "." + rnd(alnum, 30), "", ""},

		{"airlock key", "AIRLOCK_API_KEY=" + alk, secretscan.RuleAirlockAPIKey, alk[10:]},
		{"airlock e2b-format key", "E2B_API_KEY=" + e2b, secretscan.RuleAirlockAPIKey, e2b[10:]},
		{"airlock prefix only", "keys start with alk_ and then base32", "", ""},
		{"airlock key too short", "alk_" + rnd("abcdefghijklmnopqrstuvwxyz234567", 51), "", ""},

		{"generic assignment", `API_TOKEN = "` + generic + `"`, secretscan.RuleGenericSecret, generic},
		{"generic yaml", "database:\n  password: " + generic + "\n", secretscan.RuleGenericSecret, generic},
		{"generic json", `{"client_secret": "` + generic + `"}`, secretscan.RuleGenericSecret, generic},
		{"generic go", `accessKey := "` + generic + `"`, secretscan.RuleGenericSecret, generic},
		{"generic call", "password = get_password(user)", "", ""},
		{"generic regexp", `TOKEN_RE = re.compile(r"[a-z]+")`, "", ""},
		{"generic reference", "exports2.TOKEN = exports2.STRICT_TOKEN", "", ""},
		{"generic placeholder", `token = "your-token-goes-here-1234"`, "", ""},
		{"generic hash name", `password_hash = "` + generic + `"`, "", ""},
		{"generic comparison", `if token == "` + generic + `":`, "", ""},
		{"generic path", "secret = /etc/airlock/secret9/file", "", ""},
		{"generic short", `password = "abc123"`, "", ""},
		{"generic words", "the tokenizer splits secrets from passwords", "", ""},
	}
}

func TestRules(t *testing.T) {
	sc := secretscan.Default()
	for _, c := range ruleCases(t) {
		t.Run(c.name, func(t *testing.T) {
			fs := sc.ScanBytes("f", []byte(c.text))
			if c.rule == "" {
				if len(fs) > 0 {
					t.Fatalf("found %v in a look-alike", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Rule != c.rule {
				t.Fatalf("findings %v, want one %s", fs, c.rule)
			}
			secret := c.secret
			if secret == "" {
				secret = c.text
			}
			err := secretscan.Refusal("file", fs)
			for _, s := range []string{fs[0].Excerpt, fs[0].String(), err.Error()} {
				if strings.Contains(s, secret) {
					t.Fatalf("the finding shows the secret: %s", s)
				}
			}
			if fs[0].Offset < 0 || fs[0].Offset >= int64(len(c.text)) {
				t.Fatalf("offset %d outside the text", fs[0].Offset)
			}
			if fs[0].Line < 1 {
				t.Fatalf("no line number in text: %v", fs[0])
			}
			t.Logf("%s", fs[0])
		})
	}
}

// TestRulesInBinary: the text-only rule stays quiet in a binary file, the
// others find their match there too.
func TestRulesInBinary(t *testing.T) {
	sc := secretscan.Default()
	gen := `API_TOKEN = "` + rnd(alnum, 32) + `"`
	gh := "ghp_" + rnd(alnum, 36)
	bin := append([]byte("\x7fELF\x00\x00"), []byte(gen+"\x00"+gh)...)
	fs := sc.ScanBytes("lib.so", bin)
	if len(fs) != 1 || fs[0].Rule != secretscan.RuleGitHubToken || fs[0].Line != 0 {
		t.Fatalf("findings %v, want the GitHub token alone, without a line", fs)
	}
	if got := sc.ScanBytes("t", []byte(gen)); len(got) != 1 {
		t.Fatalf("the assignment in text: %v", got)
	}
}

func TestSecretName(t *testing.T) {
	for name, want := range map[string]bool{
		"GITHUB_TOKEN": true, "AWS_SECRET_ACCESS_KEY": true, "apiKey": true, "db.password": true,
		"PGPASSWORD": true, "client-secret": true, "SSH_PASSPHRASE": true, "credentials": true,
		"TOKEN_FILE": false, "password_hash": false, "tokenize": false, "PATH": false, "MPLBACKEND": false,
		"SECRETS_DIR": false, "PUBLIC_KEY": false,
	} {
		if got := secretscan.SecretName(name); got != want {
			t.Errorf("SecretName(%q) = %v, want %v", name, got, want)
		}
	}
}
