package multi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

// maxInputs bounds the children of one multiple_inputs.
const maxInputs = 64

// FieldInputIndex is the metadata field holding the index in inputs of
// the child a message came from.
const FieldInputIndex = "input_index"

// FieldInputName is the metadata field holding the name of the child a
// message came from, set when the child has one (ArkFlow's
// `inputs: [{name: orders, type: ...}]`). The session_window join reads
// it: it is the table name of the child's messages.
const FieldInputName = "input_name"

// namePattern is what a child's name must match: an SQL identifier, since
// the join queries children by name.
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

func init() {
	inputs := component.Prop("array", "Child inputs, each an input component object with its own type and fields, "+
		"read concurrently.", nil)
	inputs["minItems"] = 1
	inputs["maxItems"] = maxInputs
	// In the configuration schema "#/$defs/component.input" is the input
	// kind's own definition (the schema of every input, selected by type),
	// so children are checked like a stream's input and their problems are
	// named by their full path. Compiled on its own (componenttest.Validate)
	// the spec schema resolves the reference to the local definition
	// below, which only requires a type.
	// A child's optional name is not part of its type's schema: the
	// configuration check removes it before checking the child (see
	// internal/config), and NewInput before building it. The published
	// schema (flowplane schema, for editors) accepts a named child with
	// only its type and name checked.
	inputs["items"] = map[string]any{
		"if": map[string]any{"required": []any{"name"}},
		"then": map[string]any{
			"type":     "object",
			"required": []any{"type", "name"},
			"properties": map[string]any{
				"type": map[string]any{"type": "string"},
				"name": map[string]any{"type": "string", "pattern": namePattern.String(),
					"description": "The child's name: metadata input_name of its messages, its table in a session_window join."},
			},
		},
		"else": map[string]any{"$ref": "#/$defs/component.input"},
	}
	schema := component.ObjectSchema(map[string]any{"inputs": inputs}, "inputs")
	schema["$defs"] = map[string]any{
		"component.input": map[string]any{
			"type":       "object",
			"required":   []any{"type"},
			"properties": map[string]any{"type": map[string]any{"type": "string"}},
		},
	}
	component.Default.RegisterInput(component.Spec{
		Name: "multiple_inputs",
		Summary: "Reads several child inputs concurrently and merges their batches into one stream, in arrival " +
			"order. Each batch keeps its child's acknowledgement, so every child keeps its own delivery guarantee; " +
			"messages carry the metadata field input_index (the child's index in inputs) and, when the child has " +
			"a name (an SQL identifier, unique among the children), input_name: the table a session_window join " +
			"reads them as. The input ends when every child has ended.",
		Schema: schema,
		Example: `type: multiple_inputs
inputs:
  - type: memory
    name: readings
    messages: ['{"sensor": "a", "value": 1}']
  - type: generate
    context: '{"sensor": "b", "value": 2}'
    interval: 1s
    count: 10
`,
	}, NewInput)
}

var _ component.Input = (*Input)(nil)

// child is one child input and whether its Connect succeeded.
type child struct {
	typ       string
	name      string // "" when unnamed
	in        component.Input
	connected bool // owned by Connect's caller
}

// item is what a child's reader hands to Read: a batch or a read error.
type item struct {
	idx   int
	batch message.Batch
	ack   message.AckFunc
	err   error
}

// errClosed acknowledges batches a child produced after Close began.
var errClosed = errors.New("multiple_inputs: closed before the batch was read")

// Input merges child inputs.
//
// Once connected, one reader goroutine per child calls its Read and hands
// the result over the unbuffered items channel, so at most one batch per
// child waits for Read. items is closed when every reader has returned:
// every child ended, or Close stopped them.
type Input struct {
	children []*child
	log      *slog.Logger

	mu      sync.Mutex // guards started, closed
	started bool
	closed  bool

	items  chan item
	cancel context.CancelFunc // stops the readers
	wg     sync.WaitGroup     // the readers
}

// NewInput builds every child through component.Default; a child's error
// is named by its path, e.g. `inputs[1].count: ...`.
func NewInput(conf map[string]any, res component.Resources) (component.Input, error) {
	var c struct {
		Inputs []map[string]any `json:"inputs"`
	}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	if len(c.Inputs) == 0 {
		return nil, errors.New("inputs: at least one is required")
	}
	if len(c.Inputs) > maxInputs {
		return nil, fmt.Errorf("inputs: at most %d are allowed, got %d", maxInputs, len(c.Inputs))
	}
	log := res.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Input{log: log, items: make(chan item)}
	var errs []error
	names := map[string]int{}
	for i, cc := range c.Inputs {
		name, err := childName(cc, i, names)
		if err != nil {
			errs = append(errs, err)
		}
		typ, _ := cc["type"].(string)
		if typ == "" {
			errs = append(errs, fmt.Errorf("inputs[%d].type: required", i))
			continue
		}
		fields := maps.Clone(cc)
		delete(fields, "type")
		delete(fields, "name")
		cres := res
		cres.Logger = log.With("child", i)
		in, err := component.Default.NewInput(typ, fields, cres)
		if err != nil {
			errs = append(errs, childError(i, err))
			continue
		}
		m.children = append(m.children, &child{typ: typ, name: name, in: in})
	}
	if len(errs) > 0 {
		_ = m.closeChildren(context.Background())
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// childName returns the optional name of child i, checking it against
// namePattern and the names seen so far.
func childName(cc map[string]any, i int, seen map[string]int) (string, error) {
	raw, ok := cc["name"]
	if !ok {
		return "", nil
	}
	name, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("inputs[%d].name: must be a string", i)
	}
	if !namePattern.MatchString(name) {
		return "", fmt.Errorf("inputs[%d].name: %q is not a name (letters, digits and _, not starting with a digit, at most 128)", i, name)
	}
	if first, dup := seen[name]; dup {
		return "", fmt.Errorf("inputs[%d].name: duplicate name %q (also inputs[%d])", i, name, first)
	}
	seen[name] = i
	return name, nil
}

// fieldPath matches the field path a component error starts with, such
// as "count" or "mode.subject" or "inputs[0].url".
var fieldPath = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])*$`)

// pathError is a child's error with the child's path in front.
type pathError struct {
	msg string
	err error
}

func (e *pathError) Error() string { return e.msg }
func (e *pathError) Unwrap() error { return e.err }

// childError puts inputs[i] in front of a child's constructor error:
// "count: ..." becomes "inputs[1].count: ...", an error naming no field
// "inputs[1]: ...", an unknown type "inputs[1].type: ...".
func childError(i int, err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok { // several problems, each with its path
		var errs []error
		for _, e := range j.Unwrap() {
			errs = append(errs, childError(i, e))
		}
		return errors.Join(errs...)
	}
	p := "inputs[" + strconv.Itoa(i) + "]"
	var u *component.UnknownError
	if errors.As(err, &u) {
		return &pathError{msg: p + ".type: " + err.Error(), err: err}
	}
	msg := err.Error()
	if field, _, ok := strings.Cut(msg, ": "); ok && field != "json" && fieldPath.MatchString(field) {
		return &pathError{msg: p + "." + msg, err: err}
	}
	return &pathError{msg: p + ": " + msg, err: err}
}

// Connect connects every child not connected yet; children connected by
// an earlier, failed call stay connected. It fails when any child fails,
// with every child's error (a permanent one makes the whole error
// permanent).
func (m *Input) Connect(ctx context.Context) error {
	var errs []error
	for i, c := range m.children {
		if c.connected {
			continue
		}
		if err := c.in.Connect(ctx); err != nil {
			errs = append(errs, fmt.Errorf("inputs[%d] (%s): %w", i, c.typ, err))
			continue
		}
		c.connected = true
	}
	return errors.Join(errs...)
}

// start runs one reader per child, once.
func (m *Input) start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	for i, c := range m.children {
		m.wg.Add(1)
		go m.read(ctx, i, c)
	}
	go func() {
		m.wg.Wait()
		close(m.items)
	}()
}

// read hands the child's batches and errors to Read until the child ends
// or ctx (Close) stops it. After an error it reads again only once Read
// took the error, so the stream's retry backoff paces a failing child.
func (m *Input) read(ctx context.Context, idx int, c *child) {
	defer m.wg.Done()
	for {
		b, ack, err := c.in.Read(ctx)
		if errors.Is(err, message.ErrEndOfInput) {
			m.log.Info("child input ended", "child", idx, "type", c.typ)
			return
		}
		if err != nil && ctx.Err() != nil {
			return
		}
		select {
		case m.items <- item{idx: idx, batch: b, ack: ack, err: err}:
		case <-ctx.Done():
			if err == nil && ack != nil {
				_ = ack(context.Background(), errClosed)
			}
			return
		}
	}
}

// Read returns the next batch of any child, its messages tagged with
// input_index, and the child's own AckFunc. A child's read error is
// returned naming the child; the child is read again afterwards. Read
// returns message.ErrEndOfInput once every child has ended.
func (m *Input) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	m.start()
	if !m.isStarted() {
		return message.Batch{}, nil, errors.New("multiple_inputs: closed")
	}
	select {
	case it, ok := <-m.items:
		if !ok {
			return message.Batch{}, nil, message.ErrEndOfInput
		}
		if it.err != nil {
			return message.Batch{}, nil, fmt.Errorf("inputs[%d] (%s): %w", it.idx, m.children[it.idx].typ, it.err)
		}
		return tag(it.batch, it.idx, m.children[it.idx].name), it.ack, nil
	case <-ctx.Done():
		return message.Batch{}, nil, ctx.Err()
	}
}

func (m *Input) isStarted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started
}

// tag returns b with input_index, and input_name when the child has a
// name, set on every message. The messages and their Fields maps are
// copied: the child may still hold them (to redeliver the batch). A batch
// in columnar form is returned as it is: its rows have no metadata fields.
func tag(b message.Batch, idx int, name string) message.Batch {
	if b.Table != nil {
		return b
	}
	v := strconv.Itoa(idx)
	msgs := make([]message.Message, len(b.Messages))
	for i, msg := range b.Messages {
		f := make(map[string]string, len(msg.Meta.Fields)+2)
		maps.Copy(f, msg.Meta.Fields)
		f[FieldInputIndex] = v
		if name != "" {
			f[FieldInputName] = name
		}
		msg.Meta.Fields = f
		msgs[i] = msg
	}
	return message.Batch{Messages: msgs}
}

// Close stops the readers, waits for them (bounded by ctx) and closes
// every child, returning their errors.
func (m *Input) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	started, cancel := m.started, m.cancel
	m.mu.Unlock()
	if started {
		cancel()
		done := make(chan struct{})
		go func() {
			m.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			// A child's Read ignores its context; closing the children
			// under it is the only way left to end it.
			m.log.Warn("child inputs did not stop reading; closing them anyway")
		}
	}
	return m.closeChildren(ctx)
}

func (m *Input) closeChildren(ctx context.Context) error {
	var errs []error
	for i, c := range m.children {
		if err := c.in.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("inputs[%d] (%s): close: %w", i, c.typ, err))
		}
	}
	return errors.Join(errs...)
}
