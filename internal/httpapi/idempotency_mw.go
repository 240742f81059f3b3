package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
)

// maxReplayBody bounds what is kept of a response for replay; a larger
// response is not stored (a retry runs the handler again).
const maxReplayBody = 1 << 20

// replayedHeaders are the response headers kept with a stored response.
var replayedHeaders = []string{"Content-Type", "Location", "ETag"}

// idempotent runs h under the request's Idempotency-Key, if any: the body is
// hashed (and put back for h), the key claimed in the store, and h's
// response recorded; a retry of the same request gets the recorded response
// with Idempotent-Replayed: true. Only responses below 500 are kept.
func (rt *Router) idempotent(w http.ResponseWriter, r *http.Request, h HandlerFunc) error {
	vals := r.Header.Values(HeaderIdempotencyKey)
	if len(vals) == 0 {
		return h(w, r)
	}
	if len(vals) > 1 || !validToken(vals[0], maxIdempotencyKeyLength) {
		return BadRequest(CodeInvalidHeader, "Idempotency-Key must be 1 to 255 printable ASCII characters")
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return bodyReadError(err)
		}
		body = b
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	ctx := r.Context()
	key := IdempotencyKey{Principal: Principal(ctx), Resource: r.Method + " " + r.URL.EscapedPath(), Key: vals[0]}
	fp := requestFingerprint(r, body)
	stored, err := rt.idem.Begin(ctx, key, fp)
	switch {
	case errors.Is(err, ErrIdempotencyKeyReused):
		return Conflict(CodeIdempotencyKeyReused,
			"this Idempotency-Key was already used on this resource with a different request body or query")
	case errors.Is(err, ErrIdempotencyKeyInUse):
		return Conflict(CodeIdempotencyKeyInUse,
			"a request with this Idempotency-Key is still in progress; retry later")
	case err != nil:
		return err
	case stored != nil:
		replay(w, stored)
		return nil
	}

	rec := &recordingWriter{ResponseWriter: w}
	finished := false
	defer func() {
		if !finished { // a re-panicked http.ErrAbortHandler
			_ = rt.idem.Finish(context.WithoutCancel(ctx), key, fp, nil)
		}
	}()
	serve(rt.log, h, rec, r)
	finished = true
	var resp *StoredResponse
	if rec.status < http.StatusInternalServerError && !rec.overflow {
		resp = &StoredResponse{Status: rec.status, Header: rec.kept, Body: rec.body.Bytes()}
		if resp.Status == 0 {
			resp.Status = http.StatusOK
		}
	}
	if err := rt.idem.Finish(context.WithoutCancel(ctx), key, fp, resp); err != nil {
		rt.log.LogAttrs(ctx, slog.LevelWarn, "idempotency store: finish failed",
			slog.String("correlation_id", CorrelationID(ctx)),
			slog.String("error", err.Error()))
	}
	return nil
}

// requestFingerprint identifies a request within one key (principal,
// method and path): the query and the SHA-256 of the body.
func requestFingerprint(r *http.Request, body []byte) string {
	bodySum := sha256.Sum256(body)
	h := sha256.New()
	io.WriteString(h, r.URL.RawQuery)
	h.Write([]byte{0})
	h.Write(bodySum[:])
	return hex.EncodeToString(h.Sum(nil))
}

func replay(w http.ResponseWriter, s *StoredResponse) {
	h := w.Header()
	for k, v := range s.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Set(HeaderIdempotentReplay, "true")
	w.WriteHeader(s.Status)
	_, _ = w.Write(s.Body)
}

// recordingWriter passes a response through and keeps a copy for replay.
type recordingWriter struct {
	http.ResponseWriter
	status   int
	kept     http.Header
	body     bytes.Buffer
	overflow bool
}

func (rw *recordingWriter) WriteHeader(code int) {
	if rw.status == 0 && code >= 200 {
		rw.status = code
		rw.kept = http.Header{}
		for _, k := range replayedHeaders {
			// Add canonicalizes the key ("ETag" is stored as "Etag"), so a
			// store reading the header with Values finds it.
			for _, v := range rw.Header().Values(k) {
				rw.kept.Add(k, v)
			}
		}
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recordingWriter) Write(b []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	if rw.body.Len()+len(b) > maxReplayBody {
		rw.overflow = true
	} else if !rw.overflow {
		rw.body.Write(b)
	}
	return rw.ResponseWriter.Write(b)
}

// Flush lets a handler flush through the recorder.
func (rw *recordingWriter) Flush() {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(rw.ResponseWriter).Flush()
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (rw *recordingWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }
