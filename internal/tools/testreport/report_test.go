package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `{"Action":"start","Package":"example.com/m/a"}
{"Action":"run","Package":"example.com/m/a","Test":"TestFast"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFast","Output":"=== RUN   TestFast\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestFast","Output":"quiet noise\n"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestFast","Elapsed":0.01}
{"Action":"run","Package":"example.com/m/a","Test":"TestSlow"}
{"Action":"run","Package":"example.com/m/a","Test":"TestSlow/case"}
{"Action":"output","Package":"example.com/m/a","Test":"TestSlow/case","Output":"    a_test.go:9: boom\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"TestSlow/case","Elapsed":41.5}
{"Action":"output","Package":"example.com/m/a","Test":"TestSlow","Output":"--- FAIL: TestSlow (42.00s)\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"TestSlow","Elapsed":42}
{"Action":"output","Package":"example.com/m/a","Output":"FAIL\n"}
{"Action":"output","Package":"example.com/m/a","Output":"FAIL\texample.com/m/a\t42.1s\n"}
{"Action":"fail","Package":"example.com/m/a","Elapsed":42.1}
# example.com/m/b
b.go:3:1: syntax error
{"Action":"run","Package":"example.com/m/c","Test":"TestMid"}
{"Action":"skip","Package":"example.com/m/c","Test":"TestMid","Elapsed":7}
{"Action":"run","Package":"example.com/m/c","Test":"TestHangs"}
{"Action":"output","Package":"example.com/m/c","Test":"TestHangs","Output":"panic: test timed out\n"}
{"Action":"output","Package":"example.com/m/c","Output":"PASS\n"}
{"Action":"output","Package":"example.com/m/c","Output":"ok  \texample.com/m/c\t9.0s\n"}
{"Action":"pass","Package":"example.com/m/c","Elapsed":9}
`

func TestReport(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	for _, l := range strings.Split(strings.TrimSuffix(sample, "\n"), "\n") {
		r.line([]byte(l))
	}
	r.summary(2)
	got := out.String()
	for _, want := range []string{
		"a_test.go:9: boom\n",                         // a failing subtest's output
		"--- FAIL: TestSlow (42.00s)\n",               // and its parent's
		"FAIL\texample.com/m/a\t42.1s\n",              // the package line
		"# example.com/m/b\nb.go:3:1: syntax error\n", // not JSON: as it came
		"ok  \texample.com/m/c\t9.0s\n",               // a passing package
		"--- UNFINISHED: example.com/m/c TestHangs\npanic: test timed out\n",
		"==> slowest packages (of 2)\n    42.1 s  fail example.com/m/a\n     9.0 s  pass example.com/m/c\n",
		"(of 3 top-level tests; 1 passed, 2 failed, 1 skipped, subtests included)\n    42.0 s  fail example.com/m/a TestSlow\n     7.0 s  skip example.com/m/c TestMid\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q; got:\n%s", want, got)
		}
	}
	for _, bad := range []string{"quiet noise", "PASS\n"} {
		if strings.Contains(got, bad) {
			t.Errorf("report has %q (a passing test's or package's noise); got:\n%s", bad, got)
		}
	}
}
