package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// client calls the Hub's API over HTTP.
type client struct {
	base string // http://127.0.0.1:port
	hc   *http.Client
}

// httpError is a non-2xx answer: its status and problem code.
type httpError struct {
	status int
	code   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d %s", e.status, e.code) }

// do sends method path (under base) with body JSON-encoded (none when nil)
// and token as bearer credential, and decodes a 2xx answer into out when
// out is not nil. A non-2xx answer is an *httpError.
func (c *client) do(ctx context.Context, method, path, token string, body, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil || method != http.MethodGet {
		// Every mutation needs a JSON Content-Type, bodiless ones too.
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&p)
		_, _ = io.Copy(io.Discard, res.Body)
		return res.Header, &httpError{status: res.StatusCode, code: p.Code}
	}
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			return res.Header, fmt.Errorf("decode %s %s: %w", method, path, err)
		}
	}
	// Drain so that the connection goes back to the pool.
	_, _ = io.Copy(io.Discard, res.Body)
	return res.Header, nil
}

// newTransport returns a transport for maxConns connections to the Hub at
// most. Connections come from rotating loopback source addresses
// (127.0.1.1-127.0.1.250), so that tens of thousands of sockets to one
// port never run out of ephemeral ports.
func newTransport(maxConns int) *http.Transport {
	var next atomic.Uint32
	return &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			src := net.IPv4(127, 0, 1, byte(1+next.Add(1)%250))
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 10 * time.Second}
			return d.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost:     maxConns,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}
