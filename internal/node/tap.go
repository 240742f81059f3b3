package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/engine"
	"github.com/flowplane/flowplane/internal/eventlog"
	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/tap"
	"github.com/flowplane/flowplane/internal/wire"
)

// tapDropInterval paces the "dropped" events of a tap whose reader is slow.
const tapDropInterval = time.Second

// Tap kinds: what a TapSession samples.
const (
	TapStream = "stream"
	TapJob    = "job"
)

// TapSession is a live tap opened on a stream or a job of this node:
// Run delivers its samples, redacted, until its duration passes.
type TapSession struct {
	n        *Node
	t        *tap.Tap
	detach   func()
	duration time.Duration
}

// OpenTap attaches a tap to stream or job id (kind TapStream or TapJob).
// Errors: ErrStreamNotFound, ErrJobNotFound, a *tap.ParamError for a stage
// or operator the resource lacks. The caller must Close the session.
func (n *Node) OpenTap(kind, id string, p tap.Params) (*TapSession, error) {
	var (
		t      *tap.Tap
		detach func()
		err    error
	)
	switch kind {
	case TapStream:
		t, detach, err = n.opts.Engine.TapStream(id, p, nil)
		if errors.Is(err, engine.ErrStreamNotFound) {
			err = fmt.Errorf("%w: %q", ErrStreamNotFound, id)
		}
	case TapJob:
		t, detach, err = n.opts.Engine.TapJob(id, p, nil)
	default:
		err = fmt.Errorf("tap kind %q: must be %s or %s", kind, TapStream, TapJob)
	}
	if err != nil {
		var pe *tap.ParamError
		if !errors.As(err, &pe) && !errors.Is(err, ErrStreamNotFound) && !errors.Is(err, ErrJobNotFound) {
			err = errors.New(n.redact(err.Error()))
		}
		return nil, err
	}
	return &TapSession{n: n, t: t, detach: detach, duration: p.Duration}, nil
}

// Close detaches the tap; Run returns soon after.
func (s *TapSession) Close() { s.detach() }

// Run calls emit with each sampled message (a wire.TapMessage, event
// wire.TapEventMessage), a wire.TapCounts (wire.TapEventDropped) at most
// once a second while the drop count grows, and a wire.TapEnd
// (wire.TapEventEnd) when the duration passed; after each group of events
// ready at once it calls flush. It returns when the duration passed, ctx
// ended, or emit or flush failed (with that error). While flush blocks
// (a slow reader), the tap drops and counts; the stream never waits.
func (s *TapSession) Run(ctx context.Context, emit func(event string, v any) error, flush func() error) error {
	defer s.detach()
	end := time.NewTimer(s.duration)
	defer end.Stop()
	tick := time.NewTicker(tapDropInterval)
	defer tick.Stop()
	var reported uint64
	pending := 0 // events emitted and not flushed
	for {
		// Flush once nothing more is ready, or after a bounded group, so
		// that a fast tap neither holds events back nor grows the buffer.
		var ready <-chan time.Time
		if pending > 0 {
			ready = closedTime
		}
		select {
		case <-ctx.Done():
			return nil
		case <-end.C:
			if err := emit(wire.TapEventEnd, wire.TapEnd{Reason: wire.TapEndDuration, TapCounts: s.Counts()}); err != nil {
				return err
			}
			return flush()
		case <-tick.C:
			if d := s.t.Dropped(); d != reported {
				reported = d
				if err := emit(wire.TapEventDropped, s.Counts()); err != nil {
					return err
				}
				pending++
			}
		case smp := <-s.t.C():
			if err := emit(wire.TapEventMessage, s.n.tapMessage(smp)); err != nil {
				return err
			}
			if pending++; pending < tapFlushEvery {
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			pending = 0
		case <-ready:
			if err := flush(); err != nil {
				return err
			}
			pending = 0
		}
	}
}

// tapFlushEvery bounds the events a tap buffers before it flushes.
const tapFlushEvery = 16

// closedTime is always ready: a select on it takes its other cases first
// only when they are ready too, which is good enough for "flush when idle".
var closedTime = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// Counts returns what the tap sampled and dropped so far.
func (s *TapSession) Counts() wire.TapCounts {
	return wire.TapCounts{Sampled: s.t.Sampled(), Dropped: s.t.Dropped()}
}

// tapMessage is a sample as served: every metadata value under a key that
// names a credential masked whole, and every secret value of the node's
// configurations redacted from the payload and the other values.
func (n *Node) tapMessage(smp tap.Sample) wire.TapMessage {
	m := wire.TapMessage{Stage: smp.Point, SampledAt: wire.At(smp.At.UTC().Truncate(time.Millisecond)), Encoding: wire.TapEncodingText}
	if len(smp.Meta) > 0 {
		m.Metadata = make(map[string]string, len(smp.Meta))
		for k, v := range smp.Meta {
			if credentialMeta(k) {
				m.Metadata[k] = config.Mask
			} else {
				m.Metadata[k] = n.redact(v)
			}
		}
	}
	text := n.redact(string(smp.Payload))
	if utf8.ValidString(text) {
		m.Payload = text
	} else {
		m.Payload, m.Encoding = base64.StdEncoding.EncodeToString([]byte(text)), wire.TapEncodingBase64
	}
	return m
}

// credentialWords are what a metadata key naming a credential holds
// (HTTP headers, Kafka and NATS headers): wider than config.IsCredentialKey,
// since a tap shows data, not configuration.
var credentialWords = []string{"authorization", "password", "passwd", "token", "secret", "apikey", "api_key", "cookie", "credential", "private_key", "session", "signature"}

// credentialMeta reports whether a metadata key names a credential.
func credentialMeta(key string) bool {
	k := strings.ToLower(strings.ReplaceAll(key, "-", "_"))
	if config.IsCredentialKey(k) {
		return true
	}
	for _, w := range credentialWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

func (s *server) getStreamTap(w http.ResponseWriter, r *http.Request) error {
	return s.serveTap(w, r, TapStream)
}

func (s *server) getJobTap(w http.ResponseWriter, r *http.Request) error {
	return s.serveTap(w, r, TapJob)
}

// serveTap answers a tap request with its events (API.md SSE framing,
// without ids: a tap is not replayed).
func (s *server) serveTap(w http.ResponseWriter, r *http.Request, kind string) error {
	p, err := tap.ParseParams(r.URL.Query(), kind == TapJob)
	if err != nil {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, err.Error())
	}
	sess, err := s.n.OpenTap(kind, r.PathValue("id"), p)
	if err != nil {
		return s.tapProblem(err)
	}
	defer sess.Close()
	// The node shutting down ends the tap (with an end event): its
	// server's Shutdown waits for every response in flight.
	closing := httpapi.Closing(r.Context())
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	sse := eventlog.StartSSE(w)
	err = sess.Run(ctx, func(event string, v any) error {
		sse.Event("", event, v)
		return nil
	}, sse.Flush)
	if errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if err == nil && r.Context().Err() == nil && ctx.Err() != nil {
		sse.Event("", wire.TapEventEnd, wire.TapEnd{Reason: wire.TapEndNode, TapCounts: sess.Counts()})
		_ = sse.Flush()
	}
	return nil // the client went away, or the duration passed
}

// tapProblem maps an OpenTap error to its problem.
func (s *server) tapProblem(err error) error {
	var pe *tap.ParamError
	if errors.As(err, &pe) {
		return httpapi.BadRequest(httpapi.CodeInvalidQuery, pe.Error())
	}
	return s.problem(err)
}

// tapDocs documents the tap routes.
func tapDoc(what, where string) httpapi.Doc {
	return httpapi.Doc{Summary: "Live tap: sampled messages of a " + what + " as server-sent events", Tag: map[string]string{TapStream: tagStreams, TapJob: tagJobs}[what],
		Query: []httpapi.Param{
			{Name: where, Description: tap.QueryDoc[where]}, {Name: "rate", Type: "integer", Description: tap.QueryDoc["rate"]}, {Name: "duration", Description: tap.QueryDoc["duration"]},
		},
		ResponseMedia: "text/event-stream", Problems: []int{http.StatusNotFound}}
}
