package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// scenario is one benchmark case: the broker side of a run and each
// engine's configuration of it.
type scenario struct {
	name string
	// preload, when set, fills the broker once before the case's runs.
	preload func(ctx context.Context, b *brokers) error
	// prepare readies the broker for one run (id names the run) and
	// returns the run's names, a probe counting the records done so far at
	// the broker, and a cleanup.
	prepare func(ctx context.Context, b *brokers, id string) (params, probe, func(), error)
	// flowplane and benthos render the `streams`/`input`..`output` part of
	// each engine's configuration.
	flowplane func(p params) string
	benthos   func(p params) string
}

// probe counts the records a run has done, as the broker sees them.
type probe func(ctx context.Context) (int64, error)

// params are the names and sizes one run's configurations refer to.
type params struct {
	kafka   string // "host:port" of the Kafka broker
	natsURL string
	topic   string
	group   string
	subject string
	stream  string
	durable string
	records int64
	batch   int
}

const (
	kafkaInTopic  = "bench-in"
	natsInStream  = "BENCH_IN"
	natsInSubject = "bench.in"
)

func caseNames() []string {
	var names []string
	for _, sc := range scenarios() {
		names = append(names, sc.name)
	}
	return names
}

func (b *brokers) params() params {
	return params{kafka: b.kafkaAddrs[0], natsURL: b.natsURL, records: b.o.records, batch: b.o.batch}
}

// scenarios are the cases in the order they run.
func scenarios() []scenario {
	return []scenario{
		{
			name: "kafka-in",
			preload: func(ctx context.Context, b *brokers) error {
				return b.preloadKafka(ctx, kafkaInTopic)
			},
			prepare: func(_ context.Context, b *brokers, id string) (params, probe, func(), error) {
				p := b.params()
				p.topic, p.group = kafkaInTopic, "bench-"+id
				return p, func(ctx context.Context) (int64, error) { return b.committed(ctx, p.group, p.topic) }, func() {}, nil
			},
			flowplane: func(p params) string {
				return flowplaneStream(fmt.Sprintf(`{type: kafka, brokers: [%q], topics: [%q], consumer_group: %q, client_id: bench, batch_size: %d}`,
					p.kafka, p.topic, p.group, p.batch), `{type: drop}`)
			},
			benthos: func(p params) string {
				return benthosConfig(fmt.Sprintf(`{kafka_franz: {seed_brokers: [%q], topics: [%q], consumer_group: %q, client_id: bench, `+
					`start_from_oldest: true, commit_period: 100ms, batching: {count: %d, period: 10ms}}}`,
					p.kafka, p.topic, p.group, p.batch), `{drop: {}}`)
			},
		},
		{
			name: "kafka-out",
			prepare: func(ctx context.Context, b *brokers, id string) (params, probe, func(), error) {
				p := b.params()
				p.topic = "bench-out-" + id
				if err := b.createTopic(ctx, p.topic); err != nil {
					return p, nil, nil, err
				}
				return p, func(ctx context.Context) (int64, error) { return b.endOffsets(ctx, p.topic) }, func() {}, nil
			},
			flowplane: func(p params) string {
				return flowplaneStream(flowplaneGenerate(p),
					fmt.Sprintf(`{type: kafka, brokers: [%q], topic: {type: value, value: %q}, client_id: bench}`, p.kafka, p.topic))
			},
			benthos: func(p params) string {
				return benthosConfig(benthosGenerate(p),
					fmt.Sprintf(`{kafka_franz: {seed_brokers: [%q], topic: %q, client_id: bench}}`, p.kafka, p.topic))
			},
		},
		{
			name: "nats-js-in",
			preload: func(ctx context.Context, b *brokers) error {
				return b.preloadStream(ctx, natsInStream, natsInSubject)
			},
			prepare: func(_ context.Context, b *brokers, id string) (params, probe, func(), error) {
				p := b.params()
				p.stream, p.subject, p.durable = natsInStream, natsInSubject, "bench_"+strings.ReplaceAll(id, "-", "_")
				cleanup := func() {
					ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
					defer cancel()
					_ = b.js.DeleteConsumer(ctx, p.stream, p.durable)
				}
				return p, func(ctx context.Context) (int64, error) { return b.ackFloor(ctx, p.stream, p.durable) }, cleanup, nil
			},
			flowplane: func(p params) string {
				return flowplaneStream(fmt.Sprintf(`{type: nats, url: %q, mode: {type: jet_stream, stream: %q, durable_name: %q, `+
					`deliver: all, max_ack_pending: %d}, batch_size: %d}`,
					p.natsURL, p.stream, p.durable, natsMaxAckPending(p), min(p.batch, 10000)), `{type: drop}`)
			},
			// Benthos' push consumer (its pull path fetches one message at
			// a time); nats_jetstream has no input batching.
			benthos: func(p params) string {
				return benthosConfig(fmt.Sprintf(`{nats_jetstream: {urls: [%q], stream: %q, subject: %q, durable: %q, deliver: all, max_ack_pending: %d}}`,
					p.natsURL, p.stream, p.subject, p.durable, natsMaxAckPending(p)), `{drop: {}}`)
			},
		},
		{
			name: "nats-out",
			prepare: func(_ context.Context, b *brokers, id string) (params, probe, func(), error) {
				p := b.params()
				p.subject = "bench.core." + id
				var n atomic.Int64
				sub, err := b.nc.Subscribe(p.subject, func(*nats.Msg) { n.Add(1) })
				if err != nil {
					return p, nil, nil, err
				}
				// Core NATS drops for a slow subscriber: let this one buffer.
				if err := sub.SetPendingLimits(-1, -1); err != nil {
					return p, nil, nil, err
				}
				if err := b.nc.Flush(); err != nil {
					return p, nil, nil, err
				}
				return p, func(context.Context) (int64, error) { return n.Load(), nil }, func() { _ = sub.Unsubscribe() }, nil
			},
			flowplane: func(p params) string {
				return flowplaneStream(flowplaneGenerate(p), natsOutput(p, "regular"))
			},
			benthos: func(p params) string {
				return benthosConfig(benthosGenerate(p), fmt.Sprintf(`{nats: {urls: [%q], subject: %q}}`, p.natsURL, p.subject))
			},
		},
		{
			name: "nats-js-out",
			prepare: func(ctx context.Context, b *brokers, id string) (params, probe, func(), error) {
				p := b.params()
				p.subject = "bench.js." + id
				p.stream = "BENCH_OUT_" + strings.ReplaceAll(id, "-", "_")
				if _, err := b.createStream(ctx, p.stream, p.subject); err != nil {
					return p, nil, nil, err
				}
				cleanup := func() {
					ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
					defer cancel()
					_ = b.js.DeleteStream(ctx, p.stream)
				}
				return p, func(ctx context.Context) (int64, error) { return b.streamMsgs(ctx, p.stream) }, cleanup, nil
			},
			flowplane: func(p params) string {
				return flowplaneStream(flowplaneGenerate(p), natsOutput(p, "jet_stream"))
			},
			benthos: func(p params) string {
				return benthosConfig(benthosGenerate(p), fmt.Sprintf(`{nats_jetstream: {urls: [%q], subject: %q}}`, p.natsURL, p.subject))
			},
		},
	}
}

// flowplaneGenerate and benthosGenerate are the same finite source in
// each engine: -records messages {"id":N,"pad":"x..."} of about 100 bytes,
// in batches of -batch, as fast as possible.
// flowplaneStream is flowplane's configuration of one stream from input
// to output (YAML flow objects), with the same two workers in every case.
func flowplaneStream(input, output string) string {
	return fmt.Sprintf("streams:\n  - id: bench\n    input: %s\n    pipeline: {thread_num: 2, processors: []}\n    output: %s\n", input, output)
}

// benthosConfig is Benthos' configuration from input to output (YAML flow
// objects).
func benthosConfig(input, output string) string {
	return fmt.Sprintf("input: %s\noutput: %s\n", input, output)
}

// natsOutput is flowplane's nats output to the case's subject in mode
// regular or jet_stream.
func natsOutput(p params, mode string) string {
	return fmt.Sprintf(`{type: nats, url: %q, mode: {type: %s, subject: {type: value, value: %q}}}`, p.natsURL, mode, p.subject)
}

func flowplaneGenerate(p params) string {
	return fmt.Sprintf(`{type: generate, context: '{"id":{{count}},"pad":"%s"}', interval: 0s, count: %d, batch_size: %d}`,
		generatedPad, p.records, p.batch)
}

func benthosGenerate(p params) string {
	return fmt.Sprintf(`{generate: {mapping: 'root = {"id": count("gen"), "pad": "%s"}', interval: "", count: %d, batch_size: %d}}`,
		generatedPad, p.records, p.batch)
}

// natsMaxAckPending is the JetStream consumers' limit of messages in
// flight, the same for both engines.
func natsMaxAckPending(p params) int { return max(1024, 4*p.batch) }
