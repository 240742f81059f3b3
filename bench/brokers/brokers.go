package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// brokers are the servers of this process and the harness' own clients of
// them (to preload records and to count what the engines did).
type brokers struct {
	o options

	kafka      *kfake.Cluster
	kafkaAddrs []string
	kcl        *kgo.Client
	kadm       *kadm.Client

	nats    *server.Server
	natsURL string
	nc      *nats.Conn
	js      jetstream.JetStream
}

func startBrokers(ctx context.Context, o options) (_ *brokers, err error) {
	b := &brokers{o: o}
	defer func() {
		if err != nil {
			b.close()
		}
	}()

	// kfake listens on 127.0.0.1 only.
	if b.kafka, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(o.partitions)); err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	b.kafkaAddrs = b.kafka.ListenAddrs()
	if b.kcl, err = kgo.NewClient(
		kgo.SeedBrokers(b.kafkaAddrs...),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
	); err != nil {
		return nil, err
	}
	b.kadm = kadm.NewClient(b.kcl)

	b.nats, err = server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		NoSigs:    true,
		NoLog:     true,
		JetStream: true,
		StoreDir:  filepath.Join(o.dir, "jetstream"),
		// Room for -records in a stream and a subscriber that is slower
		// than the publisher for a moment.
		JetStreamMaxStore:  16 << 30,
		JetStreamMaxMemory: 1 << 30,
	})
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", err)
	}
	b.nats.Start()
	if !b.nats.ReadyForConnections(10 * time.Second) {
		return nil, errors.New("nats-server: not ready within 10s")
	}
	b.natsURL = b.nats.ClientURL()
	if b.nc, err = nats.Connect(b.natsURL, nats.Timeout(5*time.Second)); err != nil {
		return nil, err
	}
	if b.js, err = jetstream.New(b.nc); err != nil {
		return nil, err
	}
	fmt.Printf("brokers: kfake Kafka at %s, nats-server %s at %s (JetStream, file store)\n",
		strings.Join(b.kafkaAddrs, ","), server.VERSION, b.natsURL)
	return b, nil
}

func (b *brokers) close() {
	if b.nc != nil {
		b.nc.Close()
	}
	if b.nats != nil {
		b.nats.Shutdown()
		b.nats.WaitForShutdown()
	}
	if b.kcl != nil {
		b.kcl.Close()
	}
	if b.kafka != nil {
		b.kafka.Close()
	}
}

// record is the i-th preloaded payload: JSON of exactly 100 bytes.
func record(i int64) []byte {
	head := fmt.Sprintf(`{"id":%d,"user":"u%d","pad":"`, i, i%100_000)
	return []byte(head + strings.Repeat("x", 100-len(head)-2) + `"}`)
}

// generatedPad pads the records the engines generate themselves,
// {"id":N,"pad":"..."}, to 100 bytes at a 6-digit N.
var generatedPad = strings.Repeat("x", 100-len(`{"id":123456,"pad":""}`))

// createTopic makes a topic of -partitions partitions.
func (b *brokers) createTopic(ctx context.Context, topic string) error {
	resp, err := b.kadm.CreateTopic(ctx, int32(b.o.partitions), 1, nil, topic)
	if err != nil {
		return err
	}
	return resp.Err
}

// preloadKafka writes -records records to topic, round robin over its
// partitions.
func (b *brokers) preloadKafka(ctx context.Context, topic string) error {
	if err := b.createTopic(ctx, topic); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
	)
	for i := int64(1); i <= b.o.records; i++ {
		b.kcl.Produce(ctx, &kgo.Record{Topic: topic, Value: record(i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	if err := b.kcl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// committed is the sum of group's committed offsets over topic's
// partitions: the records the group acknowledged.
func (b *brokers) committed(ctx context.Context, group, topic string) (int64, error) {
	offs, err := b.kadm.FetchOffsetsForTopics(ctx, group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return 0, nil // the engine has not joined yet
	}
	if err != nil {
		return 0, err
	}
	var n int64
	for _, ps := range offs {
		for _, o := range ps {
			if o.Err == nil && o.At > 0 {
				n += o.At
			}
		}
	}
	return n, nil
}

// endOffsets is the sum of topic's end offsets: the records in it.
func (b *brokers) endOffsets(ctx context.Context, topic string) (int64, error) {
	offs, err := b.kadm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	var n int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n, nil
}

// createStream makes a JetStream stream on a file store capturing subject.
func (b *brokers) createStream(ctx context.Context, name, subject string) (jetstream.Stream, error) {
	return b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:     name,
		Subjects: []string{subject},
		Storage:  jetstream.FileStorage,
	})
}

// preloadStream publishes -records records to subject, which a stream
// captures, and waits for every acknowledgement.
func (b *brokers) preloadStream(ctx context.Context, stream, subject string) error {
	if _, err := b.createStream(ctx, stream, subject); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	const window = 4096
	for i := int64(1); i <= b.o.records; i++ {
		if _, err := b.js.PublishAsync(subject, record(i)); err != nil {
			return err
		}
		if i%window == 0 || i == b.o.records {
			select {
			case <-b.js.PublishAsyncComplete():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return err
	}
	if int64(info.State.Msgs) != b.o.records {
		return fmt.Errorf("stream %s holds %d messages, want %d", stream, info.State.Msgs, b.o.records)
	}
	return nil
}

// ackFloor is the stream sequence below which durable consumer name has
// every message acknowledged (0 until the engine created it): with the
// stream holding sequences 1..-records, the records acknowledged.
func (b *brokers) ackFloor(ctx context.Context, stream, name string) (int64, error) {
	// The older JetStream API reads push and pull consumers alike.
	js, err := b.nc.JetStream(nats.Context(ctx))
	if err != nil {
		return 0, err
	}
	info, err := js.ConsumerInfo(stream, name, nats.Context(ctx))
	if errors.Is(err, nats.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return int64(info.AckFloor.Stream), nil
}

// streamMsgs is the number of messages stream holds.
func (b *brokers) streamMsgs(ctx context.Context, stream string) (int64, error) {
	st, err := b.js.Stream(ctx, stream)
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}
