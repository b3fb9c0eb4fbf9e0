package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/airlockhq/airlock"
	"github.com/airlockhq/airlock/client"
)

const templateUsage = `usage:
  airlock template build [-f Dockerfile] DIR --name NAME [--start-cmd CMD]
                         [--ready-cmd CMD] [--build-arg KEY=VALUE]... [--allow HOST]...
                         [-o json|table]
  airlock template import REF --name NAME [--username USER] [--wait] [-o json|table]
  airlock template ls [-o json|table]
  airlock template show NAME [-o json|table]
  airlock template logs NAME
  airlock template rm NAME...

A template is an image a tenant brings: build sends DIR as the build
context and builds the Dockerfile (DIR/Dockerfile unless -f names
another) on the server, following the build log on stderr until the
build ends; a failed build prints the failing line and exits non-zero.
import pulls REF
(host:port/repo:tag) from a registry and adds Airlock's agent and
hardening; the build runs on the server (status building, then ready or
failed). Then run from it with "template": NAME on /v1/execute and
/v1/sessions. With --username, the password is read from the
AIRLOCK_REGISTRY_PASSWORD environment variable; it is used for this pull
only and never stored. With --wait, import follows the build log and
exits non-zero if the build fails.

A session becomes a template with 'airlock session template SESSION
--name NAME [--include-memory]'.

flags:
  -f FILE                 the Dockerfile (build; default DIR/Dockerfile)
  --start-cmd CMD         a process started in every sandbox of the template
  --ready-cmd CMD         run until it succeeds before a sandbox is handed out
  --build-arg KEY=VALUE   a Dockerfile ARG's value; repeatable
  --allow HOST            give RUN steps a network through the egress proxy,
                          to HOST (host, host:port or *.domain[:port]); repeatable
  -o, --output FORMAT     table or json; build and import print only the name without it
  --url URL, --key KEY, --profile NAME
                          server, API key and profile (see airlock login)
`

func runTemplate(ctx context.Context, args []string, std stdio) error {
	if len(args) == 0 {
		return errUsage("template", "want a subcommand: build, import, ls, show, logs or rm")
	}
	verb := args[0]
	switch verb {
	case "build", "import", "ls", "list", "show", "get", "logs", "rm", "delete":
	default:
		return errUsage("template", "unknown subcommand %q (want build, import, ls, show, logs or rm)", verb)
	}
	fs := newFlagSet("template "+verb, templateUsage, std.err)
	var srv serverFlags
	var out outputFlags
	srv.register(fs)
	out.register(fs, true)
	name := fs.String("name", "", "")
	user := fs.String("username", "", "")
	wait := fs.Bool("wait", false, "")
	file := fs.String("f", "", "")
	startCmd := fs.String("start-cmd", "", "")
	readyCmd := fs.String("ready-cmd", "", "")
	bargs := buildArgs{}
	fs.Var(bargs, "build-arg", "")
	var allow allowList
	fs.Var(&allow, "allow", "")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	c, err := srv.client(nil)
	if err != nil {
		return apiFailed(std, err, &srv)
	}
	fail := func(err error) error { return apiFailed(std, err, &srv) }
	switch verb {
	case "build":
		if len(pos) != 1 || *name == "" {
			return errUsage("template build", "%v", errBuildNoDir)
		}
		req := airlock.CreateTemplateRequest{Name: *name, StartCmd: *startCmd, ReadyCmd: *readyCmd}
		if len(bargs) > 0 {
			req.BuildArgs = bargs
		}
		if len(allow) > 0 {
			req.Network = &airlock.TemplateNetwork{Allow: allow}
		}
		t, err := runTemplateBuild(ctx, c, *file, pos[0], req, std)
		if err != nil {
			var ae *client.Error
			if errors.As(err, &ae) {
				return fail(err)
			}
			return err
		}
		if t.Status == airlock.TemplateFailed {
			return templateFailed(t)
		}
		return printTemplate(std, &out, t)
	case "import":
		if len(pos) != 1 || *name == "" {
			return errUsage("template import", "want one REF and --name NAME")
		}
		req := airlock.CreateTemplateRequest{Name: *name, FromImage: pos[0]}
		if *user != "" {
			req.RegistryAuth = &airlock.RegistryAuth{Username: *user, Password: os.Getenv("AIRLOCK_REGISTRY_PASSWORD")}
		}
		t, err := c.CreateTemplate(ctx, req)
		if err != nil {
			return fail(err)
		}
		if *wait {
			if t, err = awaitTemplate(ctx, c, t.Name, std.err); err != nil {
				return fail(err)
			}
			if t.Status == airlock.TemplateFailed {
				return templateFailed(t)
			}
		}
		return printTemplate(std, &out, t)
	case "ls", "list":
		l, err := c.ListTemplates(ctx)
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			return writeJSON(std.out, l)
		}
		tb := newTable(std.out, "NAME", "OWNER", "STATUS", "SOURCE", "SIZE_BYTES", "CREATED")
		for _, t := range l {
			owner := "tenant"
			if t.TenantID == "" {
				owner = "operator"
			}
			tb.row(t.Name, owner, t.Status, t.Source, t.SizeBytes, t.CreatedAt.Local().Format(time.DateTime))
		}
		return tb.flush()
	case "show", "get":
		if len(pos) != 1 {
			return errUsage("template show", "want one NAME")
		}
		t, err := c.Template(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		if out.json(std) {
			return writeJSON(std.out, t)
		}
		return writeRecord(std.out, t)
	case "logs":
		if len(pos) != 1 {
			return errUsage("template logs", "want one NAME")
		}
		if err := c.TemplateLogs(ctx, pos[0], std.out); err != nil {
			return fail(err)
		}
		return nil
	}
	if len(pos) == 0 {
		return errUsage("template rm", "want one or more NAMEs")
	}
	for _, n := range pos {
		if err := c.DeleteTemplate(ctx, n); err != nil {
			return fail(err)
		}
		fmt.Fprintf(std.out, "%s deleted\n", printableText(n))
	}
	return nil
}
