package testsuite

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
)

// File is one test file: the cases of a `*_test.yaml` file, or of a
// configuration's `tests:` section.
type File struct {
	// Path is the file the cases were read from.
	Path string
	// Config is the configuration the cases test (Path itself for a
	// `tests:` section).
	Config string
	Cases  []Case
}

// Case is one test case: a stream case (Stream set) or a job case (Job
// set).
type Case struct {
	Name string
	Path string // "cases[2]" or "tests[2]", for messages

	Stream string
	// Processor, when not nil, runs processors[*Processor] of the stream
	// alone instead of the whole pipeline.
	Processor *int
	Input     []Input
	BatchSize int
	// Expect and ExpectErrors are nil when not given: the output is then
	// not checked, and error_output must stay empty.
	Expect       []Matcher
	ExpectErrors []Matcher

	Job   string
	Steps []Step
}

// Input is one message fed to a stream.
type Input struct {
	Payload  []byte
	Metadata map[string]string
	Key      string
}

// Matcher is one expected message or record: every condition given must
// hold.
type Matcher struct {
	Path     string // for messages
	Payload  *string
	JSON     any
	HasJSON  bool
	Subset   any
	Expr     string
	Metadata map[string]string
	Error    string // a substring of the error a processor failed with
}

// Step is one step of a job case; exactly one of its fields is set.
type Step struct {
	Path string

	Send       map[string][]any // records by source operator
	Watermark  map[string]int64 // advance_watermark: ms by source
	Idle       []string         // sources
	Checkpoint bool
	Restart    bool
	End        bool
	Expect     map[string][]Matcher // committed output by sink operator
}

// Kind names the step as its key in a test file.
func (s Step) Kind() string {
	switch {
	case s.Send != nil:
		return "send"
	case s.Watermark != nil:
		return "advance_watermark"
	case s.Idle != nil:
		return "idle"
	case s.Checkpoint:
		return "checkpoint"
	case s.Restart:
		return "restart"
	case s.End:
		return "end"
	}
	return "expect"
}

// MaxCases bounds the cases of one file, MaxItems the messages, records,
// steps and matchers of one case.
const (
	MaxCases = 1024
	MaxItems = 100000
)

// parseFile reads the cases of a test file whose tree is v.
func parseFile(path string, v any) (*File, error) {
	d := &decoder{}
	f := &File{Path: path}
	m := d.object("", v, "config", "cases")
	if m != nil {
		f.Config = d.str("config", m["config"], false)
		if _, ok := m["cases"]; !ok {
			d.fail("", "cases is required")
		}
		f.Cases = parseCases(d, "cases", m["cases"])
	}
	return f, d.err(path)
}

// parseSection reads a configuration's `tests:` section.
func parseSection(path string, v any) (*File, error) {
	d := &decoder{}
	f := &File{Path: path, Config: path}
	f.Cases = parseCases(d, "tests", v)
	return f, d.err(path)
}

func parseCases(d *decoder, path string, v any) []Case {
	items := d.list(path, v, MaxCases)
	var cases []Case
	names := map[string]string{}
	for i, it := range items {
		p := fmt.Sprintf("%s[%d]", path, i)
		c, ok := parseCase(d, p, it)
		if !ok {
			continue
		}
		if prev, dup := names[c.Name]; dup {
			d.fail(p+".name", fmt.Sprintf("%q is also the name of %s", c.Name, prev))
		}
		names[c.Name] = p
		cases = append(cases, c)
	}
	return cases
}

func parseCase(d *decoder, path string, v any) (Case, bool) {
	m := d.object(path, v, "name", "stream", "processor", "input", "batch_size", "expect", "expect_errors", "job", "steps")
	if m == nil {
		return Case{}, false
	}
	c := Case{Path: path}
	c.Name = d.str(path+".name", m["name"], true)
	c.Stream = d.str(path+".stream", m["stream"], false)
	c.Job = d.str(path+".job", m["job"], false)
	_, isJob := m["steps"]
	if c.Job != "" || isJob {
		if c.Stream != "" {
			d.fail(path, "a case tests a stream or a job, not both")
		}
		for _, k := range []string{"processor", "input", "batch_size", "expect", "expect_errors"} {
			if _, ok := m[k]; ok {
				d.fail(path+"."+k, "not a field of a job case (a job case has steps)")
			}
		}
		for i, s := range d.list(path+".steps", m["steps"], MaxItems) {
			if st, ok := parseStep(d, fmt.Sprintf("%s.steps[%d]", path, i), s); ok {
				c.Steps = append(c.Steps, st)
			}
		}
		if !slices.ContainsFunc(c.Steps, func(s Step) bool { return s.Expect != nil }) {
			d.fail(path+".steps", "a job case needs at least one expect step: it would check nothing")
		}
		return c, true
	}
	if p, ok := m["processor"]; ok {
		n := d.integer(path+".processor", p, 0, math.MaxInt32)
		c.Processor = &n
	}
	if b, ok := m["batch_size"]; ok {
		c.BatchSize = d.integer(path+".batch_size", b, 1, MaxItems)
	}
	for i, in := range d.list(path+".input", m["input"], MaxItems) {
		c.Input = append(c.Input, parseInput(d, fmt.Sprintf("%s.input[%d]", path, i), in))
	}
	if len(c.Input) == 0 {
		d.fail(path+".input", "a stream case needs at least one input message")
	}
	if e, ok := m["expect"]; ok {
		c.Expect = parseMatchers(d, path+".expect", e)
	}
	if e, ok := m["expect_errors"]; ok {
		c.ExpectErrors = parseMatchers(d, path+".expect_errors", e)
	}
	if c.Expect == nil && c.ExpectErrors == nil {
		d.fail(path, "a stream case needs expect or expect_errors: it would check nothing")
	}
	return c, true
}

func parseInput(d *decoder, path string, v any) Input {
	m := d.object(path, v, "payload", "json", "metadata", "key")
	if m == nil {
		return Input{}
	}
	in := Input{Key: d.str(path+".key", m["key"], false), Metadata: d.strMap(path+".metadata", m["metadata"])}
	p, hasP := m["payload"]
	j, hasJ := m["json"]
	switch {
	case hasP && hasJ:
		d.fail(path, "give payload or json, not both")
	case hasP:
		in.Payload = []byte(d.str(path+".payload", p, false))
	case hasJ:
		in.Payload = canonical(j)
	default:
		d.fail(path, "a message needs payload or json")
	}
	return in
}

func parseMatchers(d *decoder, path string, v any) []Matcher {
	ms := []Matcher{} // not nil: given, maybe empty
	for i, it := range d.list(path, v, MaxItems) {
		p := fmt.Sprintf("%s[%d]", path, i)
		m := d.object(p, it, "payload", "json", "subset", "expr", "metadata", "error")
		if m == nil {
			continue
		}
		mt := Matcher{Path: p, Metadata: d.strMap(p+".metadata", m["metadata"])}
		if s, ok := m["payload"]; ok {
			str := d.str(p+".payload", s, false)
			mt.Payload = &str
		}
		mt.JSON, mt.HasJSON = m["json"]
		mt.Subset = m["subset"]
		if e, ok := m["expr"]; ok {
			mt.Expr = d.str(p+".expr", e, true)
			if mt.Expr != "" {
				if _, err := compileExpr(mt.Expr); err != nil {
					d.fail(p+".expr", err.Error())
				}
			}
		}
		if e, ok := m["error"]; ok {
			mt.Error = d.str(p+".error", e, true)
		}
		if len(m) == 0 {
			d.fail(p, "a matcher needs payload, json, subset, expr, metadata or error")
		}
		ms = append(ms, mt)
	}
	return ms
}

var stepKinds = []string{"send", "advance_watermark", "idle", "checkpoint", "restart", "end", "expect"}

func parseStep(d *decoder, path string, v any) (Step, bool) {
	m := d.object(path, v, stepKinds...)
	if m == nil {
		return Step{}, false
	}
	if len(m) != 1 {
		d.fail(path, "a step has exactly one of "+strings.Join(stepKinds, ", "))
		return Step{}, false
	}
	s := Step{Path: path}
	for k, x := range m {
		p := path + "." + k
		switch k {
		case "send":
			s.Send = map[string][]any{}
			for _, src := range d.keys(p, x) {
				s.Send[src] = d.list(p+"."+src, x.(map[string]any)[src], MaxItems)
			}
		case "advance_watermark":
			s.Watermark = map[string]int64{}
			for _, src := range d.keys(p, x) {
				s.Watermark[src] = d.time(p+"."+src, x.(map[string]any)[src])
			}
		case "idle":
			s.Idle = []string{}
			if str, ok := x.(string); ok {
				s.Idle = append(s.Idle, str)
				break
			}
			for i, it := range d.list(p, x, MaxItems) {
				s.Idle = append(s.Idle, d.str(fmt.Sprintf("%s[%d]", p, i), it, true))
			}
		case "checkpoint":
			s.Checkpoint = d.flag(p, x)
		case "restart":
			s.Restart = d.flag(p, x)
		case "end":
			s.End = d.flag(p, x)
		case "expect":
			s.Expect = map[string][]Matcher{}
			for _, snk := range d.keys(p, x) {
				s.Expect[snk] = parseMatchers(d, p+"."+snk, x.(map[string]any)[snk])
			}
		}
	}
	return s, true
}

// decoder reads a generic value tree (config.Tree) into the types above,
// collecting every problem with its path.
type decoder struct{ problems []config.Problem }

func (d *decoder) fail(path, msg string) {
	d.problems = append(d.problems, config.Problem{Path: path, Message: msg})
}

// err is every problem, each line "file: path: message".
func (d *decoder) err(file string) error {
	if len(d.problems) == 0 {
		return nil
	}
	errs := make([]error, len(d.problems))
	for i, p := range d.problems {
		if p.Path == "" {
			errs[i] = fmt.Errorf("%s: %s", file, p.Message)
		} else {
			errs[i] = fmt.Errorf("%s: %s: %s", file, p.Path, p.Message)
		}
	}
	return errors.Join(errs...)
}

// object checks that v is an object with no field beyond known.
func (d *decoder) object(path string, v any, known ...string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, fmt.Sprintf("want an object, got %s", kindOf(v)))
		return nil
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		msg := fmt.Sprintf("unknown field %q", k)
		if s := component.Suggest(k, known); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		d.fail(path, msg)
	}
	return m
}

// keys are the keys of object v, sorted.
func (d *decoder) keys(path string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, fmt.Sprintf("want an object keyed by operator id, got %s", kindOf(v)))
		return nil
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (d *decoder) list(path string, v any, limit int) []any {
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		d.fail(path, fmt.Sprintf("want a list, got %s", kindOf(v)))
		return nil
	}
	if len(l) > limit {
		d.fail(path, fmt.Sprintf("%d items, more than %d", len(l), limit))
		return nil
	}
	return l
}

func (d *decoder) str(path string, v any, required bool) string {
	if v == nil {
		if required {
			d.fail(path, "is required")
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		d.fail(path, fmt.Sprintf("want a string, got %s", kindOf(v)))
	} else if required && s == "" {
		d.fail(path, "must not be empty")
	}
	return s
}

func (d *decoder) strMap(path string, v any) map[string]string {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(path, fmt.Sprintf("want an object of strings, got %s", kindOf(v)))
		return nil
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = d.str(path+"."+k, x, false)
	}
	return out
}

func (d *decoder) integer(path string, v any, lo, hi int) int {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		d.fail(path, fmt.Sprintf("want an integer from %d to %d, got %s", lo, hi, shortJSON(v)))
		return 0
	}
	return int(f)
}

func (d *decoder) flag(path string, v any) bool {
	if b, ok := v.(bool); ok && b {
		return true
	}
	d.fail(path, "want true")
	return false
}

// time reads an event time: ms since the epoch, or an RFC 3339 string.
func (d *decoder) time(path string, v any) int64 {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.UnixMilli()
		}
	}
	d.fail(path, fmt.Sprintf("want a time: ms since the epoch or an RFC 3339 string, got %s", shortJSON(v)))
	return 0
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
