package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/stream"
	"github.com/flowplane/flowplane/internal/wal"
)

// built holds the constructed components of one stream.
type built struct {
	input       component.Input
	buffer      component.Buffer
	processors  []component.Processor
	output      component.Output
	errorOutput component.Output
	temporaries []component.Temporary // in configuration order
}

func (b *built) close(ctx context.Context) {
	for _, t := range b.temporaries {
		_ = t.Close(ctx)
	}
	if b.input != nil {
		_ = b.input.Close(ctx)
	}
	if b.buffer != nil {
		_ = b.buffer.Close(ctx)
	}
	for _, p := range b.processors {
		_ = p.Close(ctx)
	}
	if b.output != nil {
		_ = b.output.Close(ctx)
	}
	if b.errorOutput != nil {
		_ = b.errorOutput.Close(ctx)
	}
}

// buildStream constructs every component of s. Problems carry the
// configuration path of the component that failed (prefix is the stream's
// path, e.g. "streams[0]").
func buildStream(reg *component.Registry, prefix string, s config.Stream, res component.Resources) (*built, []config.Problem) {
	var ps []config.Problem
	fail := func(path string, err error) {
		ps = append(ps, config.Problem{Path: prefix + "." + path, Message: err.Error()})
	}
	b := &built{}
	var err error
	// Temporaries come first: processors find them by name when built.
	byName := map[string]component.Temporary{}
	for i, tc := range s.Temporary {
		conf := maps.Clone(tc.Fields)
		name, _ := conf["name"].(string)
		delete(conf, "name")
		t, err := reg.NewTemporary(tc.Type, conf, res)
		if err != nil {
			fail(fmt.Sprintf("temporary[%d]", i), err)
			continue
		}
		b.temporaries = append(b.temporaries, t)
		byName[name] = t
	}
	if len(byName) > 0 {
		res.Temporary = func(name string) (component.Temporary, bool) {
			t, ok := byName[name]
			return t, ok
		}
	}
	inConf, inCodec, err := reg.SplitCodec(component.KindInput, s.Input.Type, s.Input.Fields, res)
	if err != nil {
		fail("input", err)
	} else if b.input, err = reg.NewInput(s.Input.Type, inConf, res); err != nil {
		fail("input", err)
	}
	if s.Buffer != nil {
		if b.buffer, err = reg.NewBuffer(s.Buffer.Type, s.Buffer.Fields, res); err != nil {
			fail("buffer", err)
		}
	}
	for i, pc := range s.Pipeline.Processors {
		p, err := reg.NewProcessor(pc.Type, pc.Fields, res)
		if err != nil {
			fail(fmt.Sprintf("pipeline.processors[%d]", i), err)
			continue
		}
		if _, ok := p.(component.Batcher); ok && i > 0 {
			fail(fmt.Sprintf("pipeline.processors[%d]", i), fmt.Errorf("%s gathers batches across inputs and must be the first processor", pc.Type))
		}
		b.processors = append(b.processors, p)
	}
	if inCodec != nil {
		b.processors = withDecoder(b.processors, component.DecodeProcessor(inCodec))
	}
	b.output = buildOutput(reg, "output", s.Output, res, fail)
	if s.ErrorOutput != nil {
		b.errorOutput = buildOutput(reg, "error_output", *s.ErrorOutput, res, fail)
	}
	if len(ps) > 0 {
		b.close(context.Background())
		return nil, ps
	}
	return b, nil
}

// Check is the deep build: it constructs every component of every stream
// and job source and sink, then releases them, builds every job's plan,
// and returns every problem with its path. It starts nothing and binds
// nothing.
func Check(cfg *config.Config, reg *component.Registry) []config.Problem {
	return CheckIn(cfg, reg, Sandbox{})
}

// CheckIn is Check building the components in sb: a configuration or job
// from the Hub is checked in the remote sandbox, so that a constructor
// that reads a file (a codec's proto_inputs or schema_path) reads it as
// the node's remote policy allows, before the policy's own check of the
// configuration has run.
func CheckIn(cfg *config.Config, reg *component.Registry, sb Sandbox) []config.Problem {
	var ps []config.Problem
	for i, s := range cfg.Streams {
		b, sp := buildStream(reg, fmt.Sprintf("streams[%d]", i), s, component.Resources{StreamID: s.ID, FS: sb.FS, Net: sb.Net})
		ps = append(ps, sp...)
		if b != nil {
			b.close(context.Background())
		}
	}
	for i, j := range cfg.Jobs {
		plan, jp := job.Build(fmt.Sprintf("jobs[%d]", i), j)
		ps = append(ps, jp...)
		for k, src := range j.Sources {
			if in, err := reg.NewInput(src.InputType, src.Config, component.Resources{FS: sb.FS, Net: sb.Net}); err != nil {
				if !isUnknown(err) { // unknown types are reported by validation
					ps = append(ps, config.Problem{Path: fmt.Sprintf("jobs[%d].sources[%d].config", i, k), Message: err.Error()})
				}
			} else {
				_ = in.Close(context.Background())
			}
		}
		if len(jp) == 0 {
			errs, _ := job.TypeCheck(fmt.Sprintf("jobs[%d]", i), j, plan, jobSamples(reg, j, component.Resources{FS: sb.FS, Net: sb.Net}))
			ps = append(ps, errs...)
		}
		for k, snk := range j.Sinks {
			if out, err := reg.NewOutput(snk.OutputType, snk.Config, component.Resources{FS: sb.FS, Net: sb.Net}); err != nil {
				if !isUnknown(err) {
					ps = append(ps, config.Problem{Path: fmt.Sprintf("jobs[%d].sinks[%d].config", i, k), Message: err.Error()})
				}
			} else {
				_ = out.Close(context.Background())
			}
		}
	}
	return ps
}

// JobWarnings are the expressions of cfg's jobs that Check could not
// type-check, their input's shape being unknown before the jobs run:
// --validate prints them.
func JobWarnings(cfg *config.Config, reg *component.Registry) []config.Problem {
	var ws []config.Problem
	for i, j := range cfg.Jobs {
		plan, jp := job.Build(fmt.Sprintf("jobs[%d]", i), j)
		if len(jp) > 0 {
			continue
		}
		_, w := job.TypeCheck(fmt.Sprintf("jobs[%d]", i), j, plan, jobSamples(reg, j, component.Resources{}))
		ws = append(ws, w...)
	}
	return ws
}

// jobSamples are the sample records of j's sources whose inputs know
// their shape (component.Sampler), by source operator id.
func jobSamples(reg *component.Registry, j config.Job, res component.Resources) map[string]any {
	samples := map[string]any{}
	for _, src := range j.Sources {
		in, err := reg.NewInput(src.InputType, src.Config, res)
		if err != nil {
			continue
		}
		if sm, ok := in.(component.Sampler); ok {
			if v, ok := sm.Sample(); ok {
				samples[src.OperatorID] = v
			}
		}
		_ = in.Close(context.Background())
	}
	return samples
}

func isUnknown(err error) bool {
	var u *component.UnknownError
	return errors.As(err, &u)
}

// walFor opens the WAL of a stream with durability enabled.
func walFor(s config.Stream, stateDir string, res component.Resources) (stoppableWAL, error) {
	d := s.Durability
	if d == nil || !d.Enabled {
		return nil, nil
	}
	if d.Backend != nil {
		return objectWALFor(d.Backend, res)
	}
	dir := d.Path
	release := func() error { return nil }
	if dir == "" {
		dir = filepath.Join(stateDir, "wal", s.ID)
	} else if res.FS.Confined() {
		// A path the configuration chose, for the Hub's work: made
		// through the FS and pinned while the WAL is open, as the WAL
		// opens its files by path itself.
		if err := res.FS.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		pinned, unpin, err := res.FS.Pin(dir)
		if err != nil {
			return nil, err
		}
		dir, release = pinned, unpin
	}
	w, rec, err := wal.Open(wal.Options{
		Dir:          dir,
		Sync:         wal.SyncMode(d.Sync),
		SyncInterval: time.Duration(d.SyncIntervalMs) * time.Millisecond,
		SegmentBytes: d.MaxSegmentBytes,
		Logger:       res.Logger,
	})
	if err != nil {
		_ = release()
		return nil, err
	}
	if rec.TruncatedBytes > 0 || rec.CorruptSegment != "" {
		res.Logger.Warn("WAL recovered a damaged tail", "truncated_bytes", rec.TruncatedBytes, "segment", rec.CorruptSegment)
	}
	if rec.Pending > 0 {
		res.Logger.Info("WAL replays unacknowledged batches", "pending", rec.Pending)
	}
	return &streamWAL{w: w, replayBytes: rec.PendingBytes, release: release}, nil
}

var _ stream.WAL = (*streamWAL)(nil)

// buildOutput builds an output, wrapped in its codec when it has one.
func buildOutput(reg *component.Registry, path string, c config.Component, res component.Resources, fail func(string, error)) component.Output {
	conf, codec, err := reg.SplitCodec(component.KindOutput, c.Type, c.Fields, res)
	if err != nil {
		fail(path, err)
		return nil
	}
	out, err := reg.NewOutput(c.Type, conf, res)
	if err != nil {
		fail(path, err)
		return nil
	}
	if codec != nil {
		out = component.EncodingOutput(out, codec)
	}
	return out
}

// withDecoder puts an input codec's decoder first among the processors,
// after a leading Batcher (which must stay first: it gathers batches as
// the input read them).
func withDecoder(procs []component.Processor, dec component.Processor) []component.Processor {
	at := 0
	if len(procs) > 0 {
		if _, ok := procs[0].(component.Batcher); ok {
			at = 1
		}
	}
	return slices.Insert(procs, at, dec)
}
