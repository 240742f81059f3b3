package engine

import (
	"context"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
)

// StreamParts are the components of one stream as a run builds them: what
// `flowplane test` (package testsuite) runs between its own in-memory
// input and outputs, so that a test runs the processors a node would.
type StreamParts struct {
	Input  component.Input
	Buffer component.Buffer // nil without one
	// Processors are the pipeline's, with the input codec's decoder
	// inserted first (after a leading Batcher) when the input has a codec.
	Processors  []component.Processor
	Output      component.Output
	ErrorOutput component.Output // nil without one
	Temporaries []component.Temporary
}

// BuildStreamParts constructs every component of s as a run does
// (problems carry paths under prefix, e.g. "streams[0]"). The caller owns
// the parts and closes those it does not hand to a stream (Close).
func BuildStreamParts(reg *component.Registry, prefix string, s config.Stream, res component.Resources) (*StreamParts, []config.Problem) {
	b, ps := buildStream(reg, prefix, s, res)
	if b == nil {
		return nil, ps
	}
	return &StreamParts{
		Input: b.input, Buffer: b.buffer, Processors: b.processors,
		Output: b.output, ErrorOutput: b.errorOutput, Temporaries: b.temporaries,
	}, nil
}

// Close closes every part still set; a caller that handed a part on sets
// its field to nil first.
func (p *StreamParts) Close(ctx context.Context) {
	b := built{input: p.Input, buffer: p.Buffer, processors: p.Processors, output: p.Output, errorOutput: p.ErrorOutput, temporaries: p.Temporaries}
	b.close(ctx)
}
