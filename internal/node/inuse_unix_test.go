//go:build unix

package node_test

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestIdempotencyKeyInUse holds a keyed validation in flight: its
// configuration reads a ${file:...} reference from a named pipe, and
// opening a pipe blocks until a writer comes. A retry with the same key
// meanwhile is 409 idempotency_key_in_use; once the first finishes the
// retry replays it.
func TestIdempotencyKeyInUse(t *testing.T) {
	h := newHarness(t, doc(hcLocal, genStream("a", "a")))
	fifo := filepath.Join(t.TempDir(), "context.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// openWriter succeeds only while a reader has the pipe open.
	openWriter := func() (*os.File, error) {
		fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		return os.NewFile(uintptr(fd), fifo), nil
	}
	// Whatever happens, no handler stays blocked on the pipe.
	t.Cleanup(func() {
		for range 100 {
			w, err := openWriter()
			if err != nil {
				return
			}
			w.Close()
			time.Sleep(10 * time.Millisecond)
		}
	})
	text := doc(hcLocal, "  - id: f\n    input: {type: generate, context: '${file:"+fifo+"}', interval: 10ms}\n"+
		"    pipeline: {processors: []}\n    output: {type: drop}\n")
	body := configBody(t, "yaml", text)

	type result struct {
		r   response
		err error
	}
	firstc := make(chan result, 1)
	go func() {
		req, err := http.NewRequest("POST", h.base+"/configuration/validate", strings.NewReader(body))
		if err != nil {
			firstc <- result{err: err}
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "in-flight")
		res, err := h.client.Do(req)
		if err != nil {
			firstc <- result{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		firstc <- result{r: response{Status: res.StatusCode, Header: res.Header, Body: b}, err: err}
	}()

	var w *os.File
	eventually(t, "the first request to read the pipe", func() (bool, string) {
		var err error
		w, err = openWriter()
		if errors.Is(err, syscall.ENXIO) {
			return false, "no reader yet"
		}
		if err != nil {
			t.Fatalf("open the pipe: %v", err)
		}
		return true, ""
	})
	problem(t, h.expect(t, 409, "POST", "/configuration/validate", body, "Idempotency-Key", "in-flight"), "idempotency_key_in_use")
	// Another request with the same key is still reused, not in use.
	problem(t, h.expect(t, 409, "POST", "/configuration/validate", body+" ", "Idempotency-Key", "in-flight"), "idempotency_key_reused")

	if _, err := w.WriteString(`{"from": "pipe"}`); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var first result
	select {
	case first = <-firstc:
	case <-time.After(waitFor):
		t.Fatal("the first request did not finish")
	}
	if first.err != nil || first.r.Status != 200 || !strings.Contains(string(first.r.Body), `"valid":true`) {
		t.Fatalf("first request: %v %s", first.err, first.r)
	}
	again := h.expect(t, 200, "POST", "/configuration/validate", body, "Idempotency-Key", "in-flight")
	if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != string(first.r.Body) {
		t.Errorf("retry after the first finished: %v %s", again.Header, again)
	}
}
