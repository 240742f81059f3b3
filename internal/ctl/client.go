package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/wire"
)

// apiPrefix is added to a Hub URL that has no path of its own.
const apiPrefix = "/api/v1"

// maxPageSize is the Hub's largest page.
const maxPageSize = 100

// Client calls one Hub's operator API with one token.
type Client struct {
	base    string // the API root: http://127.0.0.1:8090/api/v1
	hub     string // the Hub URL as configured, for messages
	context string // the context it came from ("" for the environment)
	token   string // never printed
	http    *http.Client
	stream  *http.Client // no overall timeout: event streams last
}

// newClient builds a client for a Hub URL, with the CAs of caFile for
// https:// when set.
func newClient(hubURL, contextName, token, caFile string) (*Client, error) {
	u, err := url.Parse(hubURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("hub URL %q: want http://host:port or https://host:port", hubURL)
	}
	base := strings.TrimSuffix(u.String(), "/")
	if u.Path == "" || u.Path == "/" {
		base += apiPrefix
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		conf, err := httpapi.ClientTLS(caFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = conf
	}
	return &Client{base: base, hub: hubURL, context: contextName, token: token,
		http: &http.Client{Transport: tr, Timeout: 30 * time.Second}, stream: &http.Client{Transport: tr}}, nil
}

// APIError is a problem envelope the Hub answered, with a hint at the fix
// when one is obvious.
type APIError struct {
	Status  int
	Problem wire.Problem
	Hint    string
}

func (e *APIError) Error() string {
	var b strings.Builder
	msg := e.Problem.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	fmt.Fprintf(&b, "%s (%s, HTTP %d)", msg, orDash(e.Problem.Code), e.Status)
	if errs, ok := e.Problem.Details["errors"].([]any); ok {
		for _, x := range errs {
			if m, ok := x.(map[string]any); ok {
				fmt.Fprintf(&b, "\n  %v: %v", m["path"], m["message"])
			}
		}
	}
	if e.Hint != "" {
		b.WriteString("\nhint: " + e.Hint)
	}
	return b.String()
}

// Code is the problem's code.
func (e *APIError) Code() string { return e.Problem.Code }

// reply is what a call returned besides its body.
type reply struct {
	Status int
	Header http.Header
}

// operationID is the operation a 202 names in its Location.
func (r reply) operationID() string {
	loc := r.Header.Get("Location")
	if i := strings.LastIndex(loc, "/operations/"); i >= 0 {
		return loc[i+len("/operations/"):]
	}
	return ""
}

// generation is the generation an ETag "generation-<n>" names (0 without).
func (r reply) generation() int64 {
	s := strings.Trim(r.Header.Get("ETag"), `"`)
	n, _ := strconv.ParseInt(strings.TrimPrefix(s, "generation-"), 10, 64)
	return n
}

// request is one call of the API.
type request struct {
	method      string
	path        string // below the API root, with a leading slash
	query       url.Values
	body        []byte
	contentType string // set with body
}

// do sends req and decodes a 2xx answer into out (when not nil); any
// other answer is an *APIError.
func (c *Client) do(ctx context.Context, req request, out any) (reply, error) {
	resp, err := c.send(ctx, c.http, req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	rep := reply{Status: resp.StatusCode, Header: resp.Header}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return rep, c.unreachable(err)
	}
	if resp.StatusCode/100 != 2 {
		return rep, c.problem(resp.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return rep, fmt.Errorf("%s %s: the Hub's answer does not decode: %w", req.method, req.path, err)
		}
	}
	return rep, nil
}

// send sends req with the token.
func (c *Client) send(ctx context.Context, hc *http.Client, req request) (*http.Response, error) {
	u := c.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", req.contentType)
	}
	hr.Header.Set("Accept", "application/json")
	resp, err := hc.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	return resp, nil
}

// unreachable says which Hub (and context) could not be reached.
func (c *Client) unreachable(err error) error {
	where := c.hub
	if c.context != "" {
		where += fmt.Sprintf(" (context %q)", c.context)
	} else {
		where += " (from FLOWPLANE_HUB or --hub)"
	}
	hint := "is the Hub running there? flowplane ctl context current shows the Hub in use"
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		err = errors.New("connection refused")
	}
	return &ConnError{msg: fmt.Sprintf("cannot reach the Hub at %s: %v\nhint: %s", where, err, hint)}
}

// ConnError is a Hub that could not be reached.
type ConnError struct{ msg string }

func (e *ConnError) Error() string { return e.msg }

// problem turns a non-2xx answer into an *APIError.
func (c *Client) problem(status int, b []byte) error {
	e := &APIError{Status: status}
	_ = json.Unmarshal(b, &e.Problem)
	switch {
	case status == http.StatusUnauthorized:
		e.Hint = "the token was refused: run flowplane ctl login (or set FLOWPLANE_TOKEN)"
		if c.token == "" {
			e.Hint = "no token: run flowplane ctl login, or set FLOWPLANE_TOKEN"
		}
	case e.Problem.Code == "ambiguous_stream":
		if ids, ok := e.Problem.Details["node_ids"].([]any); ok {
			var names []string
			for _, id := range ids {
				names = append(names, fmt.Sprint(id))
			}
			e.Hint = "name the node: " + strings.Join(names, ", ") + " (NODE/STREAM or --node)"
		}
	case status == http.StatusMethodNotAllowed || (status == http.StatusNotFound && e.Problem.Code == "not_found"):
		e.Hint = "this Hub does not offer that route (an older Hub?)"
	}
	return e
}

// get decodes GET path into out.
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q}, out)
	return err
}

// postJSON sends v as JSON (nil: no body).
func (c *Client) postJSON(ctx context.Context, method, path string, v any, out any) (reply, error) {
	req := request{method: method, path: path}
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return reply{}, err
		}
		req.body, req.contentType = b, "application/json"
	}
	return c.do(ctx, req, out)
}

// listAll follows a collection's pages to the end, or to limit items when
// limit > 0.
func listAll[T any](ctx context.Context, c *Client, path string, q url.Values, limit int) ([]T, error) {
	var all []T
	q = cloneQuery(q)
	for page := 1; page <= 1_000_000; page++ {
		size := maxPageSize
		if limit > 0 && limit-len(all) < size {
			size = limit - len(all)
		}
		q.Set("page", strconv.Itoa(page))
		q.Set("page_size", strconv.Itoa(size))
		var p wire.Page[T]
		if err := c.get(ctx, path, q, &p); err != nil {
			return nil, err
		}
		all = append(all, p.Items...)
		if len(p.Items) == 0 || len(p.Items) < size || len(all) >= p.Total || (limit > 0 && len(all) >= limit) {
			break
		}
	}
	return all, nil
}

func cloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// pathEsc escapes one path segment.
func pathEsc(s string) string { return url.PathEscape(s) }
