package testsuite

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"

	_ "github.com/flowplane/flowplane/internal/connect/all"
)

// fixedClock makes durations in reports 0: tests never read the wall clock.
func fixedClock() time.Time { return time.Time{} }

// TestExamples runs the tests of every configuration in examples/, as
// `flowplane test examples/` does: they must pass, and the restart of
// job-window's really rebuilt the kernel from its checkpoint and replayed
// the source from the position recorded there.
func TestExamples(t *testing.T) {
	suites, err := Load([]string{"../../examples"}, component.Default)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range suites {
		names[s.Name] = true
	}
	for _, want := range []string{"quickstart", "job-window"} {
		if !names[want] {
			t.Errorf("no tests found for examples/%s.yaml", want)
		}
	}
	var out bytes.Buffer
	rep := Run(context.Background(), suites, Options{Out: &out, Verbose: true, Clock: fixedClock})
	if rep.Failed() {
		t.Fatalf("the examples' tests failed:\n%s", out.String())
	}
	var restarted bool
	for _, s := range rep.Suites {
		if len(s.Cases) == 0 {
			t.Errorf("%s ran no case", s.Path)
		}
		for _, c := range s.Cases {
			for _, l := range c.Log {
				if strings.HasPrefix(l, "restarted:") {
					restarted = true
					// A restart that kept the job running in memory would
					// restore nothing and replay nothing.
					want := `^restarted: restored checkpoint [1-9]\d*; source \S+ read again \d+ records after the checkpoint$`
					if strings.HasPrefix(c.Name, "job-window/") {
						want = `^restarted: restored checkpoint [1-9]\d*; source clicks read again 1 records after the checkpoint$`
					}
					if !regexp.MustCompile(want).MatchString(l) {
						t.Errorf("%s: restart logged %q", c.Name, l)
					}
				}
			}
		}
	}
	if !restarted {
		t.Errorf("no example test restarts a job:\n%s", out.String())
	}
}

// writeSuite writes a configuration and its test file into a new
// directory and returns the test file's path.
func writeSuite(t *testing.T, cfg, tests string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "x_test.yaml")
	if err := os.WriteFile(p, []byte(tests), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const doubling = `
streams:
  - id: s
    input: {type: generate, context: '{}', count: 1}
    pipeline:
      processors:
        - type: json
        - type: mapping
          expression: 'merge(this, {"doubled": this.id * 2})'
    output: {type: drop}
`

const doublingTests = `
cases:
  - name: right
    input: [{json: {id: 1}}]
    expect: [{json: {id: 1, doubled: 2}}]
  - name: wrong
    input: [{json: {id: 1}}, {json: {id: 2}}]
    expect:
      - subset: {doubled: 3}
      - expr: this.doubled > 100
`

func runFile(t *testing.T, path string, o Options) (Report, string) {
	t.Helper()
	suites, err := Load([]string{path}, component.Default)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	o.Out, o.Clock = &out, fixedClock
	return Run(context.Background(), suites, o), out.String()
}

// TestFailureDiff: a failing case fails the run and says what differs.
func TestFailureDiff(t *testing.T) {
	p := writeSuite(t, doubling, doublingTests)
	rep, out := runFile(t, p, Options{})
	if !rep.Failed() {
		t.Fatalf("the run passed:\n%s", out)
	}
	for _, want := range []string{
		"--- FAIL: x/wrong (0.00s)\n",
		"    " + p + ": output[0] (cases[1].expect[0]):\n        subset (-want +got, fields the want does not name left out):\n",
		"    " + p + ": output[1] (cases[1].expect[1]):\n        expr \"this.doubled > 100\" is false for {\"doubled\":4,\"id\":2}\n",
		"FAIL\t" + p + "\t0.000s\nFAIL\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	// go-cmp varies its diff's spacing on purpose: match around it.
	if !regexp.MustCompile(`\n        -[\s\x{00a0}]+"doubled": float64\(3\),\n        \+[\s\x{00a0}]+"doubled": float64\(2\),\n`).MatchString(out) {
		t.Errorf("the report lacks the subset's diff:\n%s", out)
	}
	if strings.Contains(out, "x/right") {
		t.Errorf("a passing case is printed without -v:\n%s", out)
	}
}

// TestRunSelects: Match runs only the cases whose full name it matches.
func TestRunSelects(t *testing.T) {
	p := writeSuite(t, doubling, doublingTests)
	rep, out := runFile(t, p, Options{Match: regexp.MustCompile(`x/ri`), Verbose: true})
	if rep.Failed() || len(rep.Suites) != 1 || len(rep.Suites[0].Cases) != 1 || rep.Suites[0].Cases[0].Name != "x/right" {
		t.Fatalf("report %+v:\n%s", rep, out)
	}
	if !strings.Contains(out, "=== RUN   x/right\n--- PASS: x/right (0.00s)\nok  \t"+p+"\t0.000s\n") {
		t.Errorf("output:\n%s", out)
	}
}

// TestJUnit: the report parses as JUnit XML with the right counts and the
// failure's diff.
func TestJUnit(t *testing.T) {
	p := writeSuite(t, doubling, doublingTests)
	rep, _ := runFile(t, p, Options{})
	var b bytes.Buffer
	if err := WriteJUnit(&b, rep); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Tests int    `xml:"tests,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Text string `xml:",chardata"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if doc.Tests != 2 || doc.Failures != 1 || len(doc.Suites) != 1 || doc.Suites[0].Name != p || len(doc.Suites[0].Cases) != 2 {
		t.Fatalf("counts: %+v\n%s", doc, b.String())
	}
	right, wrong := doc.Suites[0].Cases[0], doc.Suites[0].Cases[1]
	if right.Name != "x/right" || right.Failure != nil {
		t.Errorf("first case %+v", right)
	}
	if wrong.Name != "x/wrong" || wrong.Failure == nil || !strings.Contains(wrong.Failure.Text, `"doubled": float64(3)`) {
		t.Errorf("second case %+v", wrong)
	}
}

// TestBadFiles: a malformed test file is refused before anything runs,
// with the file and the path of the bad value.
func TestBadFiles(t *testing.T) {
	for _, tc := range []struct{ name, tests, want string }{
		{"typo", `
cases:
  - {name: a, input: [{json: 1}], expect: [{json: 1}]}
  - {name: b, input: [{json: 1}], expect: [{json: 1}]}
  - name: c
    input: [{json: 1}]
    expect: [{jsno: 1}]
`, `x_test.yaml: cases[2].expect[0]: unknown field "jsno"; did you mean "json"?`},
		{"no name", "cases: [{input: [{json: 1}], expect: []}]", "x_test.yaml: cases[0].name: is required"},
		{"same name", "cases: [{name: a, input: [{json: 1}], expect: []}, {name: a, input: [{json: 1}], expect: []}]", `cases[1].name: "a" is also the name of cases[0]`},
		{"checks nothing", "cases: [{name: a, input: [{json: 1}]}]", "cases[0]: a stream case needs expect or expect_errors"},
		{"two inputs", "cases: [{name: a, input: [{json: 1, payload: x}], expect: []}]", "cases[0].input[0]: give payload or json, not both"},
		{"bad expr", "cases: [{name: a, input: [{json: 1}], expect: [{expr: 'this +* 2'}]}]", "cases[0].expect[0].expr: expr:"},
		{"two steps in one", "cases: [{name: a, job: j, steps: [{restart: true, end: true}, {expect: {o: []}}]}]", "cases[0].steps[0]: a step has exactly one of send"},
		{"bad time", "cases: [{name: a, job: j, steps: [{advance_watermark: {s: yesterday}}, {expect: {o: []}}]}]", `cases[0].steps[0].advance_watermark.s: want a time: ms since the epoch or an RFC 3339 string, got "yesterday"`},
		{"job without expect", "cases: [{name: a, job: j, steps: [{end: true}]}]", "cases[0].steps: a job case needs at least one expect step"},
		{"stream field in a job", "cases: [{name: a, job: j, input: [], steps: [{expect: {o: []}}]}]", "cases[0].input: not a field of a job case"},
		{"not a list", "cases: {name: a}", "x_test.yaml: cases: want a list, got an object"},
		{"unknown top", "cases: []\nconfg: x.yaml", `x_test.yaml: unknown field "confg"; did you mean "config"?`},
		{"yaml", "cases: [", "x_test.yaml: yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeSuite(t, doubling, tc.tests)
			_, err := Load([]string{p}, component.Default)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestBadConfig: a test of an invalid configuration is refused with the
// configuration's path and problems.
func TestBadConfig(t *testing.T) {
	p := writeSuite(t, "streams: [{input: {type: generat}}]", "cases: [{name: a, input: [{json: 1}], expect: []}]")
	_, err := Load([]string{p}, component.Default)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(filepath.Dir(p), "x.yaml")+": invalid configuration:") {
		t.Fatalf("error %v", err)
	}
}

// TestSection: a configuration's tests: section is found in its
// directory and run against it.
func TestSection(t *testing.T) {
	dir := t.TempDir()
	cfg := doubling + `
tests:
  - name: in the section
    input: [{payload: '{"id": 4}', metadata: {origin: here}}]
    expect: [{json: {id: 4, doubled: 8}, metadata: {origin: here}}]
  - name: not json
    input: [{payload: nope}]
    expect: []
    expect_errors: [{payload: nope, error: not valid JSON}]
`
	if err := os.WriteFile(filepath.Join(dir, "y.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, out := runFile(t, dir, Options{})
	if rep.Failed() || len(rep.Suites) != 1 || len(rep.Suites[0].Cases) != 2 {
		t.Fatalf("report %+v:\n%s", rep, out)
	}
}

// TestUnexpectedErrors: without expect_errors, a message routed to
// error_output fails the case.
func TestUnexpectedErrors(t *testing.T) {
	p := writeSuite(t, doubling, "cases: [{name: a, input: [{payload: nope}], expect: []}]")
	rep, out := runFile(t, p, Options{})
	if !rep.Failed() || !strings.Contains(out, "error_output: 1 messages, none expected") {
		t.Fatalf("output:\n%s", out)
	}
}

const counting = `
streams: []
jobs:
  - id: counts
    version: 1
    operators:
      - {id: in, kind: source}
      - id: count
        kind: aggregate
        config:
          key: this.k
          aggregations: [{name: n, function: count}]
      - {id: out, kind: sink}
    edges:
      - {from: in, to: count, partitioned: true}
      - {from: count, to: out}
    sources:
      - {operator_id: in, input_type: generate, config: {context: '{}'}}
    sinks:
      - {operator_id: out, output_type: drop}
    state: {backend: embedded_kv}
    checkpoint: {interval_ms: 1000, object_store_uri: "file:///nonexistent/never-written"}
`

// TestJobRestartRestoresState: the running count after a restart goes on
// from the checkpoint's state, and the record sent after that checkpoint
// is read again from the source and counted once. A restart that lost the
// state would count from 1 again; one that kept the job in memory would
// read nothing again.
func TestJobRestartRestoresState(t *testing.T) {
	p := writeSuite(t, counting, `
cases:
  - name: restart
    steps:
      - send: {in: [{k: a}, {k: a}]}
      - checkpoint: true
      - send: {in: [{k: a}]}
      - restart: true
      - send: {in: [{k: a}]}
      - expect:
          out:
            - json: {key: a, n: 1}
            - json: {key: a, n: 2}
            - json: {key: a, n: 3}
            - json: {key: a, n: 4}
`)
	rep, out := runFile(t, p, Options{Verbose: true})
	if rep.Failed() {
		t.Fatalf("output:\n%s", out)
	}
	log := strings.Join(rep.Suites[0].Cases[0].Log, "\n")
	if !strings.Contains(log, "restarted: restored checkpoint 1; source in read again 1 records after the checkpoint") {
		t.Errorf("log:\n%s", log)
	}
}

// TestJobDuplicateFails: the committed output is compared as a whole, so
// one record too many fails the case.
func TestJobDuplicateFails(t *testing.T) {
	p := writeSuite(t, counting, `
cases:
  - name: one missing from the expectation
    steps:
      - send: {in: [{k: a}, {k: b}]}
      - expect:
          out: [{subset: {key: a}}]
`)
	rep, out := runFile(t, p, Options{})
	if !rep.Failed() || !strings.Contains(out, `cases[0].steps[1].expect.out: unexpected {"key":"b","n":1}`) {
		t.Fatalf("output:\n%s", out)
	}
}

// TestJobUnknownSource names the source a step got wrong.
func TestJobUnknownSource(t *testing.T) {
	p := writeSuite(t, counting, `
cases:
  - name: typo
    steps:
      - send: {inn: [{k: a}]}
      - expect: {out: []}
`)
	rep, out := runFile(t, p, Options{})
	if !rep.Failed() || !strings.Contains(out, `error: cases[0].steps[0] (send): no source operator "inn" in the job (in); did you mean "in"?`) {
		t.Fatalf("output:\n%s", out)
	}
}

// FuzzParse feeds the test-file parser untrusted documents: it returns
// cases or an error, never panics.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{doublingTests, "cases: [{name: a, job: j, steps: [{send: {s: [{}]}}, {advance_watermark: {s: 5}}, {idle: s}, {expect: {o: [{subset: {}}]}}]}]", "config: 1", "[]", "cases: [{name: a, processor: -1, batch_size: 1e99}]"} {
		f.Add([]byte(seed))
	}
	examples, _ := filepath.Glob("../../examples/*_test.yaml")
	for _, e := range examples {
		if b, err := os.ReadFile(e); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tree, err := config.Tree(data, config.YAML)
		if err != nil {
			return
		}
		if file, err := parseFile("f_test.yaml", tree); err == nil && file == nil {
			t.Fatal("no file and no error")
		}
		_, _ = parseSection("f.yaml", tree)
	})
}

// TestJobIdleAndLate: a window over two sources fires only once the
// silent one is idle, and a record late for the fired window reaches the
// late-event route.
func TestJobIdleAndLate(t *testing.T) {
	p := writeSuite(t, `
streams: []
jobs:
  - id: w
    version: 1
    operators:
      - {id: a, kind: source}
      - {id: b, kind: source}
      - id: win
        kind: window
        config:
          key: this.k
          window: {type: tumbling, size_ms: 1000}
          aggregations: [{name: n, function: count}]
      - {id: out, kind: sink}
      - {id: late, kind: sink}
    edges:
      - {from: a, to: win, partitioned: true}
      - {from: b, to: win, partitioned: true}
      - {from: win, to: out}
    sources:
      - operator_id: a
        input_type: generate
        config: {context: '{}'}
        time: {mode: event_time, timestamp_field: ts, late_event_policy: route, late_event_route: late}
      - operator_id: b
        input_type: generate
        config: {context: '{}'}
        time: {mode: event_time, timestamp_field: ts, late_event_policy: route, late_event_route: late}
    sinks:
      - {operator_id: out, output_type: drop}
      - {operator_id: late, output_type: drop}
    state: {backend: embedded_kv}
    checkpoint: {interval_ms: 1000, object_store_uri: "file:///nonexistent"}
`, `
cases:
  - name: idle and late
    steps:
      - send: {a: [{k: x, ts: 100}]}
      - advance_watermark: {a: 2000}
      - expect: {out: [], late: []}
      - idle: b
      - expect:
          out: [{json: {key: x, window_start: 0, window_end: 1000, n: 1}}]
      - send: {a: [{k: x, ts: 500}]}
      - expect:
          out: [{subset: {key: x, n: 1}}]
          late: [{json: {k: x, ts: 500}}]
`)
	rep, out := runFile(t, p, Options{})
	if rep.Failed() {
		t.Fatalf("output:\n%s", out)
	}
}
