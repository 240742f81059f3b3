package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/wire"
)

const dataPlaneToken = "node-token-for-the-data-plane-test"

// dataPlaneNode starts a Hub-managed node process whose health_check adds
// dataFields (YAML flow-map entries, or ""), and returns its API base URL
// and its output. The Hub asks for a heartbeat every 100ms.
func dataPlaneNode(t *testing.T, hub *stubHub, dataFields string) (string, *logBuffer) {
	t.Helper()
	hub.mu.Lock()
	hub.heartbeatMS = 100
	hub.mu.Unlock()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	doc := fmt.Sprintf("logging: {level: info}\nhealth_check: {address: %q, hub_urls: [%q], node_token: %q%s}\nstreams:\n%s",
		addr, hub.URL, dataPlaneToken, dataFields, endlessStream)
	conf := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(conf, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	child := startChild(t, conf, filepath.Join(dir, "state"))
	waitListening(t, addr)
	t.Cleanup(func() { stopChild(t, child.Process) })
	return "http://" + addr, child.Stdout.(*logBuffer)
}

// lastRegister waits for the node's registration and a heartbeat after it,
// and returns both.
func (h *stubHub) lastRegister(t *testing.T) (wire.RegisterRequest, wire.HeartbeatRequest) {
	t.Helper()
	waitUntil(t, "the node registered and heartbeat", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.registers) > 0 && len(h.heartbeats) > 0
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.registers[len(h.registers)-1], h.heartbeats[len(h.heartbeats)-1]
}

// statusDataPlane is GET /status's data_plane, raw (nil when absent).
func statusDataPlane(t *testing.T, base string) json.RawMessage {
	t.Helper()
	var st map[string]json.RawMessage
	getJSON(t, base+"/status", &st)
	return st["data_plane"]
}

// TestNodeWithoutDataPlane: a node without health_check.data_port has no
// data plane: it advertises neither network_shuffle nor a data address,
// and /status has no data_plane.
func TestNodeWithoutDataPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	hub := newStubHub(t, dataPlaneToken)
	base, _ := dataPlaneNode(t, hub, "")
	reg, hb := hub.lastRegister(t)
	if slices.Contains(reg.Capabilities, wire.CapabilityNetworkShuffle) || reg.DataAddress != "" ||
		slices.Contains(hb.Capabilities, wire.CapabilityNetworkShuffle) || hb.DataAddress != "" {
		t.Errorf("without data_port: register %v %q, heartbeat %v %q", reg.Capabilities, reg.DataAddress, hb.Capabilities, hb.DataAddress)
	}
	if dp := statusDataPlane(t, base); dp != nil {
		t.Errorf("/status data_plane = %s, want none", dp)
	}
}

// TestNodeDataPlane needs the real data plane (internal/dataplane). A
// node with data_port listens on data_host:data_port, advertises
// network_shuffle and that data address to its Hub and shows data_plane
// in /status. With a data_host that is not an address of the host (a NAT
// or relay address) it listens on every interface on data_port, says so,
// and still advertises data_host.
func TestNodeDataPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cases := []struct {
		name, host string
		wildcard   bool
	}{
		{"local data_host", "127.0.0.1", false},
		// 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this host.
		{"data_host not local", "192.0.2.1", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hub := newStubHub(t, dataPlaneToken)
			port := freePort(t)
			dataAddr := fmt.Sprintf("%s:%d", c.host, port)
			base, logs := dataPlaneNode(t, hub, fmt.Sprintf(", data_port: %d, data_host: %q", port, c.host))
			waitListening(t, fmt.Sprintf("127.0.0.1:%d", port))
			reg, hb := hub.lastRegister(t)
			if !slices.Contains(reg.Capabilities, wire.CapabilityNetworkShuffle) || reg.DataAddress != dataAddr ||
				!slices.Contains(hb.Capabilities, wire.CapabilityNetworkShuffle) || hb.DataAddress != dataAddr {
				t.Errorf("register %v %q, heartbeat %v %q; want network_shuffle at %s", reg.Capabilities, reg.DataAddress, hb.Capabilities, hb.DataAddress, dataAddr)
			}
			var dp struct {
				Address string            `json:"address"`
				Jobs    []json.RawMessage `json:"jobs"`
			}
			raw := statusDataPlane(t, base)
			if err := json.Unmarshal(raw, &dp); err != nil || dp.Jobs == nil || len(dp.Jobs) != 0 {
				t.Errorf("/status data_plane = %s (%v), want an address and no jobs", raw, err)
			}
			if want := fmt.Sprintf(":%d", port); c.wildcard != (strings.HasSuffix(dp.Address, want) && !strings.HasPrefix(dp.Address, c.host)) {
				t.Errorf("/status data_plane address %q (wildcard expected: %v)", dp.Address, c.wildcard)
			}
			warned := strings.Contains(logs.tail(200), "data plane listens on every interface")
			if warned != c.wildcard {
				t.Errorf("wildcard warning logged: %v, want %v", warned, c.wildcard)
			}
		})
	}
}

// TestDataPlaneFlood: 2,000 connections that never authenticate, opened
// at once against a node's data port (issue 29's flood, scaled down; make
// bench-dataflood runs 20,000 and measures RSS), leave the node's Node API
// answering and its stream running; the node counts the refusals, logs
// them sampled, and advertises its data-plane fingerprint.
func TestDataPlaneFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	const conns = 2000
	hub := newStubHub(t, dataPlaneToken)
	port := freePort(t)
	base, logs := dataPlaneNode(t, hub, fmt.Sprintf(", data_port: %d, data_host: 127.0.0.1", port))
	data := fmt.Sprintf("127.0.0.1:%d", port)
	waitListening(t, data)
	reg, _ := hub.lastRegister(t)
	var st struct {
		DataPlane struct {
			Fingerprint string `json:"fingerprint"`
			Refused     int64  `json:"connections_refused"`
		} `json:"data_plane"`
	}
	getJSON(t, base+"/status", &st)
	if !wire.ValidDataFingerprint(reg.DataFingerprint) || reg.DataFingerprint != st.DataPlane.Fingerprint {
		t.Fatalf("registered data_fingerprint %q, /status %q", reg.DataFingerprint, st.DataPlane.Fingerprint)
	}
	sent := func() uint64 {
		var s wire.Stream
		getJSON(t, base+"/streams/endless", &s)
		return s.Observed.Counters.Sent
	}
	before := sent()
	ctx, endFlood := context.WithCancel(context.Background())
	defer endFlood()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 128)
	for range conns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: 5 * time.Second}
			c, err := d.DialContext(ctx, "tcp", data)
			<-sem
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = c.Write([]byte{22, 3, 1, 0, 200}) // a TLS record header, then nothing
			<-ctx.Done()
		}()
	}
	// While the flood holds its connections: the Node API answers, the
	// stream runs, refusals are counted.
	waitUntil(t, "refusals counted during the flood", func() bool {
		getJSON(t, base+"/status", &st)
		return st.DataPlane.Refused >= conns/2
	})
	waitUntil(t, "the stream running during the flood", func() bool { return sent() > before+100 })
	endFlood()
	wg.Wait()
	if n := strings.Count(logs.tail(5000), "data plane connections refused"); n == 0 || n > 10 {
		t.Errorf("%d refusal log lines for %d refusals: want them sampled", n, st.DataPlane.Refused)
	}
}
