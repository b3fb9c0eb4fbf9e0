package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const loginUsage = `usage: airlock login --url URL [--profile NAME] [--key-file FILE]

Checks an API key against the server at URL and stores both as a profile
in your config directory ($XDG_CONFIG_HOME/airlock/profiles.json, else
~/.config/airlock/profiles.json, mode 0600), so that later commands need
neither sudo nor flags. The key is read from --key-file, else from stdin
(at a terminal it asks, without echo). A tenant's key is checked with
GET /v1/usage and stored as the profile's API key; an operator key is
checked with GET /v1/admin/tenants and stored as its admin key (used by
'airlock admin'). The profile becomes the current one.

Every command then takes, in order: its flags (--url, --key or
--admin-key), the environment ($AIRLOCK_URL, $AIRLOCK_API_KEY,
$AIRLOCK_ADMIN_KEY), the profile --profile or $AIRLOCK_PROFILE names,
else the current one.

  airlock login --url http://127.0.0.1:8080 < key.txt
  airlock login --url https://airlock.example --profile prod --key-file ~/prod.key

flags:
  --url URL        the server (required)
  --profile NAME   the profile to write (default $AIRLOCK_PROFILE, else
                   "default")
  --key-file FILE  read the key from FILE instead of stdin
`

const logoutUsage = `usage: airlock logout [--profile NAME]

Removes a profile (default: the one $AIRLOCK_PROFILE names, else the
current one) with its keys from your config directory. The keys stay
valid on the server: revoke them with 'airlock keys revoke'.
`

const profileUsage = `usage:
  airlock profile ls [-o json|table]
  airlock profile show [NAME] [-o json|table]
  airlock profile use NAME
  airlock profile rm NAME

Profiles are made by 'airlock login'. ls lists them (keys shown by their
first characters only) with the current one marked *; show prints one
(default the one in use); use makes NAME the current one; rm removes it.
`

func runLogin(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("login", loginUsage, std.err)
	var u, name, keyFile string
	fs.StringVar(&u, "url", "", "")
	fs.StringVar(&name, "profile", "", "")
	fs.StringVar(&keyFile, "key-file", "", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	switch {
	case len(pos) != 0:
		return errUsage("login", "unexpected argument %q", pos[0])
	case u == "":
		return errUsage("login", "want --url URL")
	}
	if name, _ = selectedProfile(name); name == "" {
		name = defaultProfile
	}
	if err := checkProfileName(name); err != nil {
		return errUsage("login", "%v", err)
	}
	key, err := readLoginKey(keyFile, std)
	if err != nil {
		return err
	}
	u = strings.TrimRight(u, "/")
	entry, who, err := checkKey(ctx, u, key)
	if err != nil {
		return err
	}
	ps, err := loadProfiles()
	if err != nil {
		return err
	}
	if old := ps.Profiles[name]; old != nil && old.URL == u {
		// Logging in with the other kind of key keeps the one stored.
		entry.APIKey = firstOf(entry.APIKey, old.APIKey)
		entry.AdminKey = firstOf(entry.AdminKey, old.AdminKey)
		entry.Tenant = firstOf(entry.Tenant, old.Tenant)
	}
	ps.Profiles[name] = entry
	ps.Current = name
	if err := ps.save(); err != nil {
		return err
	}
	path, _ := profilesPath()
	fmt.Fprintf(std.err, "airlock: logged in to %s %s; profile %q saved in %s\n", printableText(u), who, name, path)
	return nil
}

// readLoginKey reads the key from the file, else from stdin: at a
// terminal after a prompt, with echo off.
func readLoginKey(keyFile string, std stdio) (string, error) {
	var key string
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return "", err
		}
		if len(b) > maxKeyFileSize {
			return "", fmt.Errorf("%s is larger than a key", keyFile)
		}
		key = strings.TrimSpace(string(b))
	} else {
		if f, ok := std.in.(*os.File); ok && isTerminal(f) {
			fmt.Fprint(std.err, "API key: ")
			if restore, err := noEcho(f); err == nil {
				defer func() { restore(); fmt.Fprintln(std.err) }()
			}
		}
		line, err := bufio.NewReader(io.LimitReader(std.in, maxKeyFileSize)).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the key: %w", err)
		}
		key = strings.TrimSpace(line)
	}
	if key == "" {
		return "", errUsage("login", "no key: give it on stdin or with --key-file FILE")
	}
	return key, nil
}

// noEcho turns the terminal's echo off and returns what turns it back on.
func noEcho(f *os.File) (func(), error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}

// checkKey asks the server who key is: a tenant's key answers GET
// /v1/usage; an operator key is refused there as tenant-key-required and
// answers GET /v1/admin/tenants. It returns the profile to store and a
// phrase saying whose key it is.
func checkKey(ctx context.Context, u, key string) (*profileEntry, string, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	c, err := client.New(client.Config{BaseURL: u, APIKey: key, HTTPClient: hc, UserAgent: "airlock-cli/1"})
	if err != nil {
		return nil, "", errUsage("login", "--url: %s", airlock.ErrorMessage(err))
	}
	usage, err := c.Usage(ctx)
	if err == nil {
		return &profileEntry{URL: u, APIKey: key, Tenant: usage.TenantID}, "with a key of tenant " + usage.TenantID, nil
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != http.StatusForbidden {
		return nil, "", fmt.Errorf("the server did not take the key: %s", describeError(err, u))
	}
	ac := &adminClient{base: u, key: key, http: hc}
	if _, err := ac.call(ctx, http.MethodGet, "/v1/admin/tenants", nil, nil); err != nil {
		return nil, "", fmt.Errorf("the server did not take the key: %s", describeError(ce, u))
	}
	return &profileEntry{URL: u, AdminKey: key}, "with an operator key", nil
}

func runLogout(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("logout", logoutUsage, std.err)
	var name string
	fs.StringVar(&name, "profile", "", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return flagErr(err)
	}
	if len(pos) != 0 {
		return errUsage("logout", "unexpected argument %q", pos[0])
	}
	ps, err := loadProfiles()
	if err != nil {
		return err
	}
	name, _, err = ps.pick(name)
	if err != nil {
		return err
	}
	if name == "" {
		return errors.New("not logged in: there is no profile")
	}
	return removeProfile(ps, name, std)
}

func removeProfile(ps *profileSet, name string, std stdio) error {
	if ps.Profiles[name] == nil {
		return fmt.Errorf("no profile named %q", name)
	}
	delete(ps.Profiles, name)
	if ps.Current == name {
		ps.Current = ""
	}
	if err := ps.save(); err != nil {
		return err
	}
	fmt.Fprintf(std.err, "airlock: profile %q removed\n", name)
	return nil
}

func runProfile(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("profile", "want a subcommand: ls, show, use or rm")
	}
	verb := args[0]
	fs := newFlagSet("profile "+verb, profileUsage, std.err)
	var out outputFlags
	out.register(fs, false)
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	ps, err := loadProfiles()
	if err != nil {
		return err
	}
	switch verb {
	case "ls", "list":
		if len(pos) != 0 {
			return errUsage("profile ls", "unexpected argument %q", pos[0])
		}
		return listProfiles(ps, &out, std)
	case "show":
		if len(pos) > 1 {
			return errUsage("profile show", "want at most one NAME")
		}
		flagName := ""
		if len(pos) == 1 {
			flagName = pos[0]
		}
		name, p, err := ps.pick(flagName)
		if err != nil {
			return err
		}
		if p == nil {
			return errors.New("no profile in use (airlock login --url URL makes one)")
		}
		v := profileView(name, ps.Current, p)
		if out.json(std) {
			return writeJSON(std.out, v)
		}
		return writeRecord(std.out, v)
	case "use":
		if len(pos) != 1 {
			return errUsage("profile use", "want one NAME")
		}
		if ps.Profiles[pos[0]] == nil {
			return fmt.Errorf("no profile named %q", pos[0])
		}
		ps.Current = pos[0]
		return ps.save()
	case "rm", "delete":
		if len(pos) != 1 {
			return errUsage("profile rm", "want one NAME")
		}
		return removeProfile(ps, pos[0], std)
	}
	return errUsage("profile", "unknown subcommand %q (want ls, show, use or rm)", verb)
}

// shownProfile is a profile as ls and show print it: keys by their first
// characters only.
type shownProfile struct {
	Name     string `json:"name"`
	Current  bool   `json:"current"`
	URL      string `json:"url"`
	APIKey   string `json:"api_key,omitempty"`
	AdminKey string `json:"admin_key,omitempty"`
	Tenant   string `json:"tenant_id,omitempty"`
}

func profileView(name, current string, p *profileEntry) shownProfile {
	return shownProfile{Name: name, Current: name == current, URL: p.URL,
		APIKey: keyHint(p.APIKey), AdminKey: keyHint(p.AdminKey), Tenant: p.Tenant}
}

// keyHint is a key's first characters, enough to tell keys apart.
func keyHint(k string) string {
	if k == "" {
		return ""
	}
	if len(k) > 12 {
		k = k[:12]
	}
	return k + "..."
}

func listProfiles(ps *profileSet, out *outputFlags, std stdio) error {
	views := []shownProfile{}
	for _, n := range ps.names() {
		views = append(views, profileView(n, ps.Current, ps.Profiles[n]))
	}
	if out.json(std) {
		return writeJSON(std.out, map[string]any{"profiles": views})
	}
	t := newTable(std.out, "CURRENT", "NAME", "URL", "API_KEY", "ADMIN_KEY", "TENANT")
	for _, v := range views {
		mark := ""
		if v.Current {
			mark = "*"
		}
		t.row(mark, v.Name, v.URL, v.APIKey, v.AdminKey, v.Tenant)
	}
	return t.flush()
}
