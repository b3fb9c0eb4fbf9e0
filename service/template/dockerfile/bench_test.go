package dockerfile_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/airlockhq/airlock/service/template/dockerfile"
)

// benchDockerfile is the Dockerfile the benchmark builds: five layers,
// three of them RUNs.
const benchDockerfile = `FROM base
ENV APP_HOME=/opt/app
WORKDIR $APP_HOME
COPY app/ ./
RUN python3 -m compileall -q . && echo built > built.txt
RUN useradd -m -u 1100 svc
USER svc
RUN id -u > /tmp/uid
`

// TestBenchBuild measures a Dockerfile build cold (NoCache: every step
// runs), from the cache (nothing changed), after a change to its last
// RUN's inputs (only that step runs), and as a baseline one RUN true on
// base, cold: the floor of any build that runs a step.
func TestBenchBuild(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH_DOCKERFILE") == "" {
		t.Skip("set AIRLOCK_BENCH_DOCKERFILE=1 to measure (not a test)")
	}
	n := 7
	b := newBuilder(t)
	ctxDir := writeContext(t, map[string]string{"app/main.py": "print('hi')\n", "app/lib.py": "X = 1\n"})
	ctx := context.Background()
	build := func(df string, args map[string]string, noCache bool) time.Duration {
		t0 := time.Now()
		var log syncBuffer
		if _, err := b.Build(ctx, dockerfile.Request{Dockerfile: []byte(df), ContextDir: ctxDir, BuildArgs: args, NoCache: noCache, Log: &log}); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		return time.Since(t0)
	}
	report := func(name string, d []time.Duration) {
		slices.Sort(d)
		p99 := d[(len(d)*99+99)/100-1]
		t.Logf("%-32s n=%d median %7.3fs p99 %7.3fs", name, len(d), d[len(d)/2].Seconds(), p99.Seconds())
	}
	var cold, cached, changed, baseline []time.Duration
	for i := range n {
		cold = append(cold, build(benchDockerfile, nil, true))
		cached = append(cached, build(benchDockerfile, nil, false))
		// A last step whose environment differs each time: one RUN.
		df := benchDockerfile + "ARG I\nRUN echo $I > /tmp/i\n"
		changed = append(changed, build(df, map[string]string{"I": time.Now().Format(time.RFC3339Nano) + string(rune('a'+i))}, false))
		baseline = append(baseline, build("FROM base\nRUN true\n", nil, true))
	}
	report("cold (every step runs)", cold)
	report("from cache (nothing changed)", cached)
	report("last RUN changed", changed)
	report("baseline: one RUN true, cold", baseline)
}
