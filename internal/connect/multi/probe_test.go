package multi_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"

	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/output"
)

// probe is a test-only input whose behaviour and counters live in a
// probeState the test registers under an id before building it.
func init() {
	component.Default.RegisterInput(component.Spec{
		Name:    "multi_test_probe",
		Summary: "Test probe.",
		Schema:  component.ObjectSchema(map[string]any{"id": component.Prop("string", "Probe id.", nil)}, "id"),
		Example: "type: multi_test_probe\nid: x\n",
	}, func(conf map[string]any, _ component.Resources) (component.Input, error) {
		id, _ := conf["id"].(string)
		v, ok := probes.Load(id)
		if !ok {
			return nil, fmt.Errorf("id: no probe %q", id)
		}
		return &probe{st: v.(*probeState)}, nil
	})
}

var probes sync.Map // id -> *probeState

type probeState struct {
	mu          sync.Mutex // guards the fields below
	messages    int        // batches of one message emitted before the end
	failConnect int        // Connects that fail before one succeeds
	failRead    int        // Reads that fail before one succeeds
	gate        chan struct{}

	connects, closes, emitted, acks, nacks int
}

func newProbe(id string, st *probeState) *probeState {
	probes.Store(id, st)
	return st
}

func (s *probeState) counts() (connects, closes, emitted, acks, nacks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connects, s.closes, s.emitted, s.acks, s.nacks
}

type probe struct{ st *probeState }

func (p *probe) Connect(context.Context) error {
	s := p.st
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connects++
	if s.failConnect > 0 {
		s.failConnect--
		return errors.New("probe: refused")
	}
	return nil
}

func (p *probe) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	s := p.st
	s.mu.Lock()
	gate := s.gate
	if s.failRead > 0 {
		s.failRead--
		s.mu.Unlock()
		return message.Batch{}, nil, errors.New("probe: read failed")
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return message.Batch{}, nil, ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.emitted >= s.messages {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	s.emitted++
	m := message.New(fmt.Appendf(nil, "probe-%d", s.emitted))
	m.Meta.Fields = map[string]string{"probe": "yes"}
	return message.Batch{Messages: []message.Message{m}}, func(_ context.Context, err error) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err == nil {
			s.acks++
		} else {
			s.nacks++
		}
		return nil
	}, nil
}

func (p *probe) Close(context.Context) error {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.closes++
	return nil
}
