package mqtt

import (
	"encoding"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// broker is a mochi MQTT broker on a fixed loopback port that a test can
// stop and start again. Its sessions, subscriptions and inflight
// messages live in a memStore that survives restarts, as a broker with
// persistence enabled would keep them on disk.
type broker struct {
	t     testing.TB
	port  int
	store *memStore
	// user and pass, when user is set, are the only credentials the
	// broker accepts.
	user, pass string
	// admit, when set, decides which client ids may connect.
	admit func(clientID string) bool

	mu  sync.Mutex // guards srv
	srv *mochi.Server
}

// freePort returns a loopback port nothing listens on.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newBroker returns a stopped broker on a free port; start it with start.
func newBroker(t testing.TB) *broker {
	b := &broker{t: t, port: freePort(t), store: &memStore{kv: map[string][]byte{}}}
	t.Cleanup(b.stop)
	return b
}

// startBroker returns a running broker.
func startBroker(t testing.TB) *broker {
	b := newBroker(t)
	b.start()
	return b
}

func (b *broker) addr() string { return fmt.Sprintf("127.0.0.1:%d", b.port) }

func (b *broker) start() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		return
	}
	srv := mochi.New(&mochi.Options{
		InlineClient: true,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := srv.AddHook(&authHook{user: b.user, pass: b.pass, admit: b.admit}, nil); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.AddHook(b.store, nil); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "tcp", Address: b.addr()})); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		b.t.Fatal(err)
	}
	b.srv = srv
}

func (b *broker) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return
	}
	_ = b.srv.Close()
	b.srv = nil
}

// server returns the running server (nil when stopped).
func (b *broker) server() *mochi.Server {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srv
}

// authHook lets every client in, or only those with the configured
// credentials.
type authHook struct {
	mochi.HookBase
	user, pass string
	admit      func(clientID string) bool
}

func (h *authHook) ID() string { return "test-auth" }

func (h *authHook) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

func (h *authHook) OnConnectAuthenticate(_ *mochi.Client, pk packets.Packet) bool {
	if h.admit != nil && !h.admit(string(pk.Connect.ClientIdentifier)) {
		return false
	}
	return h.user == "" || (string(pk.Connect.Username) == h.user && string(pk.Connect.Password) == h.pass)
}

func (h *authHook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

// memStore is a mochi storage hook that keeps the broker's state in
// memory: records are serialized as mochi's own storage types, so a
// restarted broker loads exactly what a disk-backed one would.
type memStore struct {
	mochi.HookBase
	trace func(event string, cl *mochi.Client, pk packets.Packet) // for debugging lost messages
	mu    sync.Mutex                                              // guards kv
	kv    map[string][]byte
}

func (h *memStore) ID() string { return "test-memory-store" }

func (h *memStore) Provides(b byte) bool {
	switch b {
	case mochi.OnSessionEstablished, mochi.OnDisconnect, mochi.OnSubscribed, mochi.OnUnsubscribed,
		mochi.OnRetainMessage, mochi.OnQosPublish, mochi.OnQosComplete, mochi.OnQosDropped,
		mochi.OnClientExpired, mochi.OnRetainedExpired, mochi.OnPublished, mochi.OnPublishDropped, mochi.OnPacketSent,
		mochi.StoredClients, mochi.StoredInflightMessages, mochi.StoredRetainedMessages, mochi.StoredSubscriptions:
		return true
	}
	return false
}

func (h *memStore) put(k string, v encoding.BinaryMarshaler) {
	b, err := v.MarshalBinary()
	if err != nil {
		return
	}
	h.mu.Lock()
	h.kv[k] = b
	h.mu.Unlock()
}

func (h *memStore) del(k string) {
	h.mu.Lock()
	delete(h.kv, k)
	h.mu.Unlock()
}

// each calls f with every record under prefix, in key order.
func (h *memStore) each(prefix string, f func([]byte) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.kv))
	for k := range h.kv {
		if strings.HasPrefix(k, prefix+"/") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := f(h.kv[k]); err != nil {
			return err
		}
	}
	return nil
}

func (h *memStore) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) {
	p := cl.Properties.Props.Copy(false)
	h.put(storage.ClientKey+"/"+cl.ID, &storage.Client{
		ID: cl.ID, T: storage.ClientKey, Remote: cl.Net.Remote, Listener: cl.Net.Listener,
		Username: cl.Properties.Username, Clean: cl.Properties.Clean, ProtocolVersion: cl.Properties.ProtocolVersion,
		Properties: storage.ClientProperties{
			SessionExpiryInterval: p.SessionExpiryInterval, SessionExpiryIntervalFlag: p.SessionExpiryIntervalFlag,
			ReceiveMaximum: p.ReceiveMaximum, TopicAliasMaximum: p.TopicAliasMaximum,
			MaximumPacketSize: p.MaximumPacketSize, User: p.User,
		},
	})
}

func (h *memStore) OnDisconnect(cl *mochi.Client, _ error, expire bool) {
	if expire && cl.StopCause() != packets.ErrSessionTakenOver {
		h.del(storage.ClientKey + "/" + cl.ID)
	}
}

func (h *memStore) OnClientExpired(cl *mochi.Client) { h.del(storage.ClientKey + "/" + cl.ID) }

func (h *memStore) OnSubscribed(cl *mochi.Client, pk packets.Packet, codes []byte) {
	for i, f := range pk.Filters {
		h.put(storage.SubscriptionKey+"/"+cl.ID+":"+f.Filter, &storage.Subscription{
			ID: cl.ID + ":" + f.Filter, T: storage.SubscriptionKey, Client: cl.ID, Qos: codes[i], Filter: f.Filter,
			Identifier: f.Identifier, NoLocal: f.NoLocal, RetainHandling: f.RetainHandling, RetainAsPublished: f.RetainAsPublished,
		})
	}
}

func (h *memStore) OnUnsubscribed(cl *mochi.Client, pk packets.Packet) {
	for _, f := range pk.Filters {
		h.del(storage.SubscriptionKey + "/" + cl.ID + ":" + f.Filter)
	}
}

func storedMessage(clientID string, pk packets.Packet, t string) *storage.Message {
	p := pk.Properties.Copy(false)
	return &storage.Message{
		ID: clientID + ":" + pk.FormatID(), T: t, Client: clientID, Origin: pk.Origin, FixedHeader: pk.FixedHeader,
		TopicName: pk.TopicName, Payload: append([]byte(nil), pk.Payload...), Created: pk.Created, PacketID: pk.PacketID,
		Properties: storage.MessageProperties{
			PayloadFormat: p.PayloadFormat, MessageExpiryInterval: p.MessageExpiryInterval, ContentType: p.ContentType,
			User: p.User,
		},
	}
}

func (h *memStore) OnRetainMessage(cl *mochi.Client, pk packets.Packet, r int64) {
	if r == -1 {
		h.del(storage.RetainedKey + "/" + pk.TopicName)
		return
	}
	h.put(storage.RetainedKey+"/"+pk.TopicName, storedMessage(cl.ID, pk, storage.RetainedKey))
}

func (h *memStore) OnRetainedExpired(topic string) { h.del(storage.RetainedKey + "/" + topic) }

func (h *memStore) tr(ev string, cl *mochi.Client, pk packets.Packet) {
	if h.trace != nil {
		h.trace(ev, cl, pk)
	}
}

func (h *memStore) OnPacketSent(cl *mochi.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type == packets.Publish {
		h.tr(fmt.Sprintf("sent id=%d cl=%p", pk.PacketID, cl), cl, pk)
	}
}

func (h *memStore) OnPublished(cl *mochi.Client, pk packets.Packet) { h.tr("published", cl, pk) }

func (h *memStore) OnPublishDropped(cl *mochi.Client, pk packets.Packet) { h.tr("dropped", cl, pk) }

func (h *memStore) OnQosPublish(cl *mochi.Client, pk packets.Packet, sent int64, _ int) {
	h.tr(fmt.Sprintf("qospublish id=%d cl=%p", pk.PacketID, cl), cl, pk)
	m := storedMessage(cl.ID, pk, storage.InflightKey)
	m.Sent = sent
	h.put(storage.InflightKey+"/"+cl.ID+":"+pk.FormatID(), m)
}

func (h *memStore) OnQosComplete(cl *mochi.Client, pk packets.Packet) {
	h.tr(fmt.Sprintf("qoscomplete id=%d cl=%p", pk.PacketID, cl), cl, pk)
	h.del(storage.InflightKey + "/" + cl.ID + ":" + pk.FormatID())
}

func (h *memStore) OnQosDropped(cl *mochi.Client, pk packets.Packet) {
	h.tr(fmt.Sprintf("qosdropped id=%d", pk.PacketID), cl, pk)
	h.OnQosComplete(cl, pk)
}

func (h *memStore) StoredClients() (v []storage.Client, err error) {
	err = h.each(storage.ClientKey, func(b []byte) error {
		var c storage.Client
		if err := c.UnmarshalBinary(b); err != nil {
			return err
		}
		v = append(v, c)
		return nil
	})
	return v, err
}

func (h *memStore) StoredSubscriptions() (v []storage.Subscription, err error) {
	err = h.each(storage.SubscriptionKey, func(b []byte) error {
		var s storage.Subscription
		if err := s.UnmarshalBinary(b); err != nil {
			return err
		}
		v = append(v, s)
		return nil
	})
	return v, err
}

func (h *memStore) messages(prefix string) (v []storage.Message, err error) {
	err = h.each(prefix, func(b []byte) error {
		var m storage.Message
		if err := m.UnmarshalBinary(b); err != nil {
			return err
		}
		v = append(v, m)
		return nil
	})
	return v, err
}

// held reports how many messages the broker holds in flight for
// clientID (sent or queued, not yet acknowledged).
func (h *memStore) held(clientID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for k := range h.kv {
		if strings.HasPrefix(k, storage.InflightKey+"/"+clientID+":") {
			n++
		}
	}
	return n
}

// waitHeld waits until the broker holds n messages for clientID. mochi
// acknowledges a publish (PUBACK, PUBREC) before it queues the message
// for its subscribers, so a client that resumes its session right after
// publish returns can take the session over before the last message is
// queued, and mochi then drops it with the old connection's state.
func (b *broker) waitHeld(t testing.TB, clientID string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.store.held(clientID) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the broker holds %d messages for %s, want %d", b.store.held(clientID), clientID, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitReleased waits until the broker holds no message in flight for
// clientID: every acknowledgement the client sent was processed, and at QoS
// 2 the whole PUBREC, PUBREL, PUBCOMP exchange is over. A client closed
// earlier leaves a QoS 2 message mid-exchange, which mochi sends again as
// a PUBLISH when the session resumes.
func (b *broker) waitReleased(t testing.TB, clientID string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for b.store.held(clientID) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the broker still holds %d messages in flight for %s", b.store.held(clientID), clientID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitClosed waits until the broker has ended clientID's connection. Its
// reading of a connection is sequential, so the acknowledgements sent
// before the DISCONNECT are then processed too: mochi clones a session
// taken over by a new connection at once, without waiting for the old
// connection's last packets, so a client that reconnects right after
// Close could get acknowledged messages again.
func (b *broker) waitClosed(t testing.TB, clientID string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		srv := b.server()
		if srv == nil {
			return
		}
		cl, ok := srv.Clients.Get(clientID)
		if !ok || cl.Closed() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker still serves %s's connection", clientID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *memStore) StoredInflightMessages() ([]storage.Message, error) {
	return h.messages(storage.InflightKey)
}

func (h *memStore) StoredRetainedMessages() ([]storage.Message, error) {
	return h.messages(storage.RetainedKey)
}
