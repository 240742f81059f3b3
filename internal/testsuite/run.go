package testsuite

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
)

// CaseTimeout bounds one case.
const CaseTimeout = 60 * time.Second

// Options configure Run.
type Options struct {
	// Registry builds the streams' components; nil means component.Default.
	Registry *component.Registry
	// Match selects the cases whose full name (<configuration>/<case>)
	// it matches; nil runs every case.
	Match *regexp.Regexp
	// Verbose prints a line as each case starts and what each case
	// logged (checkpoints, restarts), as `go test -v` does.
	Verbose bool
	// Out receives the go test style report; nil discards it.
	Out io.Writer
	// Clock times cases for the report; nil means time.Now.
	Clock func() time.Time
}

// Report is the outcome of Run.
type Report struct {
	Suites []SuiteResult
}

// SuiteResult is the outcome of one test file.
type SuiteResult struct {
	Path     string
	Cases    []CaseResult
	Duration time.Duration
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Name     string // <configuration>/<case>
	Failures []string
	// Error is why the case could not run to its end (a failure too).
	Error    string
	Log      []string
	Duration time.Duration
}

// Passed reports whether the case passed.
func (c CaseResult) Passed() bool { return len(c.Failures) == 0 && c.Error == "" }

// Failed reports whether any case failed.
func (r Report) Failed() bool {
	for _, s := range r.Suites {
		if s.failed() > 0 {
			return true
		}
	}
	return false
}

func (s SuiteResult) failed() int {
	n := 0
	for _, c := range s.Cases {
		if !c.Passed() {
			n++
		}
	}
	return n
}

// Run runs the cases of suites and prints, as it goes, a line per case
// and one per file as `go test` does.
func Run(ctx context.Context, suites []*Suite, o Options) Report {
	if o.Registry == nil {
		o.Registry = component.Default
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	var rep Report
	for _, s := range suites {
		start := o.Clock()
		sr := SuiteResult{Path: s.File.Path}
		for _, c := range s.File.Cases {
			name := s.Name + "/" + c.Name
			if o.Match != nil && !o.Match.MatchString(name) {
				continue
			}
			if o.Verbose {
				fmt.Fprintf(o.Out, "=== RUN   %s\n", name)
			}
			cr := runCase(ctx, s, c, name, o)
			sr.Cases = append(sr.Cases, cr)
			printCase(o.Out, s.File.Path, cr, o.Verbose)
		}
		sr.Duration = o.Clock().Sub(start)
		rep.Suites = append(rep.Suites, sr)
		switch {
		case sr.failed() > 0:
			fmt.Fprintf(o.Out, "FAIL\t%s\t%.3fs\n", sr.Path, sr.Duration.Seconds())
		case len(sr.Cases) == 0:
			fmt.Fprintf(o.Out, "ok  \t%s\t%.3fs [no tests to run]\n", sr.Path, sr.Duration.Seconds())
		default:
			fmt.Fprintf(o.Out, "ok  \t%s\t%.3fs\n", sr.Path, sr.Duration.Seconds())
		}
	}
	if rep.Failed() {
		fmt.Fprintln(o.Out, "FAIL")
	}
	return rep
}

func runCase(ctx context.Context, s *Suite, c Case, name string, o Options) (cr CaseResult) {
	cr.Name = name
	start := o.Clock()
	defer func() { cr.Duration = o.Clock().Sub(start) }()
	ctx, cancel := context.WithTimeout(ctx, CaseTimeout)
	defer cancel()
	logf := func(format string, args ...any) { cr.Log = append(cr.Log, fmt.Sprintf(format, args...)) }
	var err error
	if c.Job != "" || c.Steps != nil {
		dir, derr := os.MkdirTemp("", "flowplane-test-*")
		if derr != nil {
			cr.Error = derr.Error()
			return cr
		}
		defer os.RemoveAll(dir)
		cr.Failures, err = runJob(ctx, s.Config, c, dir, logf)
	} else {
		cr.Failures, err = runStream(ctx, o.Registry, s.Config, c)
	}
	if err != nil {
		cr.Error = err.Error()
	}
	return cr
}

func printCase(w io.Writer, file string, c CaseResult, verbose bool) {
	secs := c.Duration.Seconds()
	if c.Passed() {
		if verbose {
			fmt.Fprintf(w, "--- PASS: %s (%.2fs)\n", c.Name, secs)
			for _, l := range c.Log {
				fmt.Fprintf(w, "    %s\n", l)
			}
		}
		return
	}
	fmt.Fprintf(w, "--- FAIL: %s (%.2fs)\n", c.Name, secs)
	for _, l := range c.Log {
		fmt.Fprintf(w, "    %s\n", l)
	}
	for _, f := range c.Failures {
		fmt.Fprintf(w, "    %s: %s\n", file, strings.ReplaceAll(f, "\n", "\n        "))
	}
	if c.Error != "" {
		fmt.Fprintf(w, "    %s: error: %s\n", file, strings.ReplaceAll(c.Error, "\n", "\n        "))
	}
}

// JUnit XML, the shape CI systems read (Jenkins, GitLab, GitHub actions).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes r as a JUnit XML report: a testsuite per file, a
// testcase per case.
func WriteJUnit(w io.Writer, r Report) error {
	var all junitSuites
	var total time.Duration
	for _, s := range r.Suites {
		js := junitSuite{Name: s.Path, Tests: len(s.Cases), Failures: s.failed(), Time: seconds(s.Duration)}
		for _, c := range s.Cases {
			jc := junitCase{Name: c.Name, Classname: s.Path, Time: seconds(c.Duration), SystemOut: strings.Join(c.Log, "\n")}
			if !c.Passed() {
				text := strings.Join(c.Failures, "\n")
				msg := "failed"
				if c.Error != "" {
					text = strings.TrimPrefix(text+"\n"+c.Error, "\n")
					msg = "error"
				}
				jc.Failure = &junitFailure{Message: msg, Text: text}
			}
			js.Cases = append(js.Cases, jc)
		}
		all.Tests += js.Tests
		all.Failures += js.Failures
		total += s.Duration
		all.Suites = append(all.Suites, js)
	}
	all.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
