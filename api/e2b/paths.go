package e2b

import (
	"encoding/base64"
	"fmt"
	"path"
	"strings"
)

// Paths: E2B's sandboxes have the user's home, /home/user, as their
// working directory; Airlock's have /workspace, which every image also
// links at /home/user. File calls reach the workspace and /tmp, like the
// native API's.
const (
	home      = "/home/user"
	workspace = "/workspace"
)

// toSandbox maps a path of an E2B call (relative to /home/user, or
// absolute) to the session's path.
func toSandbox(p string) (string, error) {
	if len(p) > 4096 || strings.ContainsRune(p, 0) {
		return "", errorf(400, "path is not valid")
	}
	if p == "" || p == "~" {
		p = home
	}
	if strings.HasPrefix(p, "~/") {
		p = home + p[1:]
	}
	if !strings.HasPrefix(p, "/") {
		p = home + "/" + p
	}
	p = path.Clean(p)
	switch {
	case p == home || p == workspace:
		return workspace, nil
	case strings.HasPrefix(p, home+"/"):
		return workspace + p[len(home):], nil
	case strings.HasPrefix(p, workspace+"/"), p == "/tmp", strings.HasPrefix(p, "/tmp/"):
		return p, nil
	}
	return "", errorf(403, fmt.Sprintf("%q is outside what file calls reach in an Airlock sandbox: %s (the workspace) and /tmp", clip(p, 200), home))
}

// fromSandbox maps a session's path back to E2B's.
func fromSandbox(p string) string {
	switch {
	case p == workspace:
		return home
	case strings.HasPrefix(p, workspace+"/"):
		return home + p[len(workspace):]
	}
	return p
}

// checkUser accepts the users E2B's SDKs name: "user" (the default) and
// "root". Both run as the sandbox's one unprivileged user: Airlock
// never gives sandbox code root.
func checkUser(u string) error {
	switch u {
	case "", "user", "root":
		return nil
	}
	return errorf(401, fmt.Sprintf("user %q does not exist in the sandbox (use \"user\" or \"root\")", clip(u, 64)))
}

// basicUser is the user of an "Authorization: Basic base64(user:)"
// header ("" without one).
func basicUser(header string) (string, error) {
	if header == "" {
		return "", nil
	}
	scheme, v, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") || len(v) > 1024 {
		return "", errorf(401, "Authorization must be Basic base64(user:)")
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
	if err != nil {
		return "", errorf(401, "Authorization must be Basic base64(user:)")
	}
	u, _, _ := strings.Cut(string(b), ":")
	return u, checkUser(u)
}
