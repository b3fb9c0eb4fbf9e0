package dockerfile_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/airlockhq/airlock/service/template/dockerfile"
)

func TestParseRefuses(t *testing.T) {
	many := "FROM base\n" + strings.Repeat("RUN true\n", 41)
	for _, tc := range []struct {
		name, src string
		line      int
		instr     string
		sentinel  error
		msg       string
	}{
		{"unsupported instruction", "FROM base\nRUN true\nEXPOSE 80\n", 3, "EXPOSE", dockerfile.ErrUnsupported, "EXPOSE is not supported"},
		{"CMD", "FROM base\n\n\nCMD [\"sh\"]\n", 4, "CMD", dockerfile.ErrUnsupported, "CMD is not supported"},
		{"unknown instruction", "FROM base\nFROBNICATE x\n", 2, "FROBNICATE", dockerfile.ErrUnsupported, "FROBNICATE is not supported"},
		{"multi-stage", "FROM base AS a\nRUN true\nFROM base\n", 3, "FROM", dockerfile.ErrUnsupported, "multi-stage"},
		{"platform", "FROM --platform=linux/arm64 base\n", 1, "FROM", dockerfile.ErrUnsupported, "--platform"},
		{"run mount", "FROM base\nRUN --mount=type=cache,target=/x true\n", 2, "RUN", dockerfile.ErrUnsupported, "--mount"},
		{"run network", "FROM base\nRUN --network=host true\n", 2, "RUN", dockerfile.ErrUnsupported, "--network"},
		{"copy from", "FROM base\nCOPY --from=other /a /b\n", 2, "COPY", dockerfile.ErrUnsupported, "--from"},
		{"add url", "FROM base\nADD https://example.com/x /x\n", 2, "ADD", dockerfile.ErrUnsupported, "URL"},
		{"add archive", "FROM base\nADD stuff.tar.gz /x/\n", 2, "ADD", dockerfile.ErrUnsupported, "archive"},
		{"heredoc", "FROM base\nRUN <<EOF\necho hi\nEOF\n", 2, "RUN", dockerfile.ErrUnsupported, "heredoc"},
		{"no from", "RUN true\n", 1, "RUN", dockerfile.ErrInvalid, "FROM"},
		{"empty", "# nothing\n", 1, "", dockerfile.ErrInvalid, "no instructions"},
		{"empty run", "FROM base\nRUN\n", 2, "RUN", dockerfile.ErrInvalid, ""},
		{"too many steps", many, 42, "RUN", dockerfile.ErrTooLarge, "more than 40"},
		{"too big", "FROM base\n" + strings.Repeat("# padding\n", 30000), 0, "", dockerfile.ErrTooLarge, "bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dockerfile.Parse([]byte(tc.src), dockerfile.Limits{})
			var le *dockerfile.LineError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want a *LineError", err)
			}
			if !errors.Is(err, tc.sentinel) || !errors.Is(err, dockerfile.ErrInvalid) {
				t.Errorf("err = %v, want %v (and ErrInvalid)", err, tc.sentinel)
			}
			if le.Line != tc.line || le.Instruction != tc.instr {
				t.Errorf("line %d instruction %q, want %d %q (%v)", le.Line, le.Instruction, tc.line, tc.instr, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("message %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	src := `ARG BASE=base
FROM ${BASE}
ARG V=1
ARG FROMCLI
ENV A=a B=${A}b PATH=/opt/bin:$PATH
WORKDIR /w
WORKDIR sub
USER sandbox
RUN echo $V
COPY x y/ ./
COPY --chown=${A} f dest
RUN ["echo", "$A"]
`
	d, err := dockerfile.Parse([]byte(src), dockerfile.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := d.FromRef(map[string]string{"BASE": "python-ds"})
	if err != nil || ref != "python-ds" {
		t.Fatalf("FromRef = %q, %v", ref, err)
	}
	steps, final, err := d.Expand([]string{"PATH=/usr/bin:/bin"}, map[string]string{"FROMCLI": "cli", "UNDECLARED": "x"})
	if err != nil {
		t.Fatal(err)
	}
	byLine := map[int]dockerfile.Step{}
	for _, s := range steps {
		byLine[s.Line] = s
	}
	run := byLine[9]
	env := strings.Join(run.Env, " ")
	if run.Argv[0] != "/bin/sh" || run.Argv[2] != "echo $V" || !strings.Contains(env, "V=1") || !strings.Contains(env, "FROMCLI=cli") ||
		!strings.Contains(env, "B=ab") || !strings.Contains(env, "PATH=/opt/bin:/usr/bin:/bin") || strings.Contains(env, "UNDECLARED") {
		t.Errorf("RUN argv %q env %q", run.Argv, env)
	}
	if run.User != "sandbox" || run.Workdir != "/w/sub" {
		t.Errorf("RUN user %q workdir %q", run.User, run.Workdir)
	}
	if c := byLine[10]; c.Dest != "/w/sub/" || len(c.Sources) != 2 {
		t.Errorf("COPY dest %q sources %q", c.Dest, c.Sources)
	}
	if c := byLine[11]; c.Dest != "/w/sub/dest" || c.Chown != "a" {
		t.Errorf("COPY --chown dest %q chown %q", c.Dest, c.Chown)
	}
	if r := byLine[12]; strings.Join(r.Argv, " ") != "echo $A" {
		t.Errorf("exec form argv %q: exec form is not expanded", r.Argv)
	}
	if final.User != "sandbox" || final.Workdir != "/w/sub" || strings.Contains(strings.Join(final.Env, " "), "V=1") {
		t.Errorf("final %+v", final)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(appDockerfile))
	f.Add([]byte("FROM base\nRUN echo \\\n  hi\nCOPY [\"a b\", \"/c/\"]\n"))
	f.Add([]byte("ARG X\nFROM $X\nENV A=\"${X:-y}\"\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := dockerfile.Parse(src, dockerfile.Limits{})
		if err != nil {
			if !errors.Is(err, dockerfile.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		d.FromRef(nil)
		d.Expand([]string{"PATH=/bin"}, map[string]string{"X": "1"})
	})
}
