package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

// snapshot builds the report of the node as observed now (without its
// sequence number): every stream's observed state with the generation and
// action id of the Hub desire last applied to it (desires; 0 and none when
// the Hub never commanded the stream), and a small bounded set of node
// metrics, and the configuration the node runs (conf; each stream's
// config_version is the Hub's version of it when conf names one).
func snapshot(n Node, desires map[string]Desire, conf *wire.ReportConfiguration, bootID string) wire.Report {
	views := n.Streams()
	rep := wire.Report{
		BootID:               bootID,
		Streams:              make([]wire.ReportStream, 0, len(views)),
		ConfigurationVersion: n.ConfigVersion(),
		Configuration:        conf,
		Metrics:              map[string]float64{},
	}
	// A stream's configuration version is in the Hub's numbering while the
	// node runs a Hub apply (the same content is the same version on every
	// node), else the node's own id.
	streamVersion := rep.ConfigurationVersion
	if conf != nil && conf.HubVersion != "" && conf.NodeVersion == rep.ConfigurationVersion {
		streamVersion = conf.HubVersion
	}
	var running, failed, stopped, completed, received, sent, errs float64
	for _, v := range views {
		d := desires[v.ID]
		c := v.Observed.Counters
		rep.Streams = append(rep.Streams, wire.ReportStream{
			ID: v.ID, State: v.Observed.State, Generation: d.Generation, ConfigVersion: streamVersion, ActionID: d.ActionID,
			// The node redacts resolved secret values from errors.
			LastError: v.Observed.LastError, LastErrorAt: v.Observed.LastErrorAt,
			Counters: &c,
		})
		switch v.Observed.State {
		case "running":
			running++
		case "failed":
			failed++
		case "stopped", "stopping":
			stopped++
		case "completed":
			completed++
		}
		received += float64(c.Received)
		sent += float64(c.Sent)
		errs += float64(c.Errors)
	}
	rep.Metrics["streams_total"] = float64(len(views))
	rep.Metrics["streams_running"] = running
	rep.Metrics["streams_failed"] = failed
	rep.Metrics["streams_stopped"] = stopped
	rep.Metrics["streams_completed"] = completed
	rep.Metrics["messages_received"] = received
	rep.Metrics["messages_sent"] = sent
	rep.Metrics["stream_errors"] = errs
	return rep
}

// changeKey is what makes a report worth sending at once: everything but
// counters, metrics and the sequence number.
func changeKey(r wire.Report) string {
	type key struct {
		Streams       []wire.ReportStream
		Version       string
		Configuration *wire.ReportConfiguration
	}
	k := key{Streams: make([]wire.ReportStream, len(r.Streams)), Version: r.ConfigurationVersion, Configuration: r.Configuration}
	for i, s := range r.Streams {
		s.Counters = nil
		k.Streams[i] = s
	}
	b, _ := json.Marshal(k)
	return string(b)
}

// reporter sends reports: soon after a change (wake, then debounce to let
// a burst of changes settle; at once after a command), when forced (after
// each register), and every period in any case. It owns the report
// sequence.
type reporter struct {
	pacer
	build func() wire.Report
	send  func(ctx context.Context, r wire.Report) error
	wakec chan struct{} // buffered(1)
}

func newReporter(build func() wire.Report, send func(context.Context, wire.Report) error, debounce, period time.Duration, b backoff) *reporter {
	return &reporter{pacer: newPacer(debounce, period, b), build: build, send: send, wakec: make(chan struct{}, 1)}
}

// wake asks for a report if the observation changed.
func (r *reporter) wake() {
	select {
	case r.wakec <- struct{}{}:
	default:
	}
}

// forceSend asks for a report whether or not anything changed.
func (r *reporter) forceSend() {
	r.force.Store(true)
	r.wake()
}

// run sends reports until ctx ends. Sequence numbers start at 1 and grow
// with every report sent (a failed send uses up its number).
func (r *reporter) run(ctx context.Context) {
	var seq int64
	var lastKey string
	r.pacer.run(ctx, r.wakec, func(ctx context.Context, due func(bool) bool) (bool, error) {
		rep := r.build()
		key := changeKey(rep)
		if !due(key != lastKey) {
			return false, nil
		}
		seq++
		rep.ReportSeq = seq
		if err := r.send(ctx, rep); err != nil {
			return false, err
		}
		lastKey = key
		return true, nil
	})
}
