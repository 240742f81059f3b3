package hub

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// oneConnClient is an Agent's HTTP client reduced to one connection, which
// reports whether each request reused it.
type oneConnClient struct {
	c *http.Client
}

func newOneConnClient(t *testing.T) *oneConnClient {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &oneConnClient{c: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// do sends a request and returns the answer and whether it went over a
// connection used before.
func (c *oneConnClient) do(t *testing.T, req *http.Request) (resp, bool) {
	t.Helper()
	r, reused, err := c.try(req)
	if err != nil {
		t.Fatal(err)
	}
	return r, reused
}

func (c *oneConnClient) try(req *http.Request) (resp, bool, error) {
	reused := false
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	res, err := c.c.Do(req)
	if err != nil {
		return resp{}, false, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}, reused, err
}

func pollers(th *testHub, node string) int {
	n, _ := th.h.fleet.Node(node)
	return n.Pollers
}

// pollGoroutines counts the goroutines inside the long-poll handler.
func pollGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "(*Hub).getCommands")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// waitParked waits until node has one long-poll waiting and no goroutine
// holds it.
func waitParked(t *testing.T, th *testHub, node string) {
	t.Helper()
	eventually(t, "a waiting poll", func() bool { return pollers(th, node) == 1 })
	eventually(t, "no goroutine holding the waiting poll", func() bool { return pollGoroutines() == 0 })
}

// TestParkedPoll: a long-poll with nothing to deliver waits parked (no
// goroutine holds it); a write answers it with the command, headers as any
// answer has them; the connection then serves the Agent's next request; a
// poll whose wait ends is answered with an empty page over the same
// connection again.
func TestParkedPoll(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	c := newOneConnClient(t)
	auth := []string{"Authorization", "Bearer " + a.session}
	hb := `{"boot_id":"` + a.bootID + `","capabilities":["stream_control"]}`
	if r, _ := c.do(t, th.request(t, t.Context(), "POST", APIPrefix+"/agent/heartbeat", hb, auth...)); r.status != 200 {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}

	type answer struct {
		r      resp
		reused bool
		err    error
	}
	got := make(chan answer, 1)
	poll := func(waitMS string) {
		req := th.request(t, t.Context(), "GET", APIPrefix+"/agent/commands?wait_ms="+waitMS, "", append(auth, httpapi.HeaderCorrelationID, "poll-1")...)
		go func() {
			r, reused, err := c.try(req)
			got <- answer{r, reused, err}
		}()
	}
	poll("20000")
	waitParked(t, th, "n1")
	w := th.put(t, "n1", "s1", `{"state":"running"}`)
	var ans answer
	select {
	case ans = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the parked poll was not answered after the write")
	}
	if ans.err != nil {
		t.Fatal(ans.err)
	}
	var page wire.Page[wire.Command]
	if err := json.Unmarshal(ans.r.body, &page); err != nil || ans.r.status != 200 {
		t.Fatalf("poll answer %d %q: %v", ans.r.status, ans.r.body, err)
	}
	if len(page.Items) != 1 || page.Items[0].CommandID != w.OperationID || page.Total != 1 {
		t.Fatalf("poll answered %+v, want the write's command", page)
	}
	if !ans.reused {
		t.Error("the poll did not go over the heartbeat's connection")
	}
	if ct, id := ans.r.header.Get("Content-Type"), ans.r.header.Get(httpapi.HeaderCorrelationID); ct != "application/json" || id != "poll-1" {
		t.Errorf("answer headers Content-Type %q, X-Correlation-ID %q", ct, id)
	}
	if n := pollers(th, "n1"); n != 0 {
		t.Errorf("%d polls still waiting", n)
	}

	// The answered poll's connection serves the next request.
	r, reused := c.do(t, th.request(t, t.Context(), "POST", APIPrefix+"/agent/commands/"+page.Items[0].CommandID+"/result",
		`{"attempt_id":"`+page.Items[0].AttemptID+`","state":"acknowledged"}`, auth...))
	if r.status != 204 || !reused {
		t.Fatalf("result after the poll: %d %s, reused connection %v", r.status, r.body, reused)
	}

	// A wait that ends answers an empty page.
	poll("50")
	select {
	case ans = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the parked poll was not answered when its wait ended")
	}
	if ans.err != nil {
		t.Fatal(ans.err)
	}
	if err := json.Unmarshal(ans.r.body, &page); err != nil || ans.r.status != 200 || len(page.Items) != 0 || page.Items == nil || !ans.reused {
		t.Fatalf("poll after its wait: %d %q, reused connection %v", ans.r.status, ans.r.body, ans.reused)
	}
	if r, reused := c.do(t, th.request(t, t.Context(), "POST", APIPrefix+"/agent/heartbeat", hb, auth...)); r.status != 200 || !reused {
		t.Fatalf("heartbeat after the poll: %d %s, reused connection %v", r.status, r.body, reused)
	}
}

// TestParkedPollAtShutdown: the Hub's shutdown answers a parked poll with
// an empty page and closes its connection, without waiting for the poll.
func TestParkedPollAtShutdown(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	c := newOneConnClient(t)
	type answer struct {
		status int
		body   string
		close  bool
		err    error
	}
	got := make(chan answer, 1)
	req := th.request(t, t.Context(), "GET", APIPrefix+"/agent/commands?wait_ms=20000", "", "Authorization", "Bearer "+a.session)
	go func() {
		res, err := c.c.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- answer{status: res.StatusCode, body: string(b), close: res.Close, err: err}
	}()
	waitParked(t, th, "n1")
	th.stop()
	select {
	case r := <-got:
		if r.err != nil || r.status != 200 || r.body != `{"items":[],"page":1,"page_size":0,"total":0}`+"\n" || !r.close {
			t.Fatalf("poll at shutdown: %+v, want 200, an empty page and Connection: close", r)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("shutdown did not answer the parked poll")
	}
}

// TestParkedPollOfGoneClient: a parked poll whose client went away (an
// Agent killed while it waited) takes no command: the poll of the Agent's
// next run gets it at once, not after the redelivery delay.
func TestParkedPollOfGoneClient(t *testing.T) {
	th := serve(t, dbPath(t), "", true)
	a := newTestAgent(th, "n1")
	a.register(t, "", 15*time.Second)
	auth := []string{"Authorization", "Bearer " + a.session}
	path := APIPrefix + "/agent/commands?wait_ms=20000"

	gone := newOneConnClient(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _ = gone.try(th.request(t, ctx, "GET", path, "", auth...))
	}()
	waitParked(t, th, "n1")
	cancel() // the client closes its connection
	<-done

	w := th.put(t, "n1", "s1", `{"state":"running"}`)
	eventually(t, "the command dispatched", func() bool {
		n, _ := th.h.fleet.Node("n1")
		return n.Queued == 1
	})
	next := newOneConnClient(t)
	got := make(chan wire.Page[wire.Command], 1)
	go func() {
		r, _, err := next.try(th.request(t, t.Context(), "GET", path, "", auth...))
		var p wire.Page[wire.Command]
		if err == nil {
			err = json.Unmarshal(r.body, &p)
		}
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	select {
	case p := <-got:
		if len(p.Items) != 1 || p.Items[0].CommandID != w.OperationID {
			t.Fatalf("the live poll got %+v, want the write's command", p)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("the live poll was not answered")
	}
}
