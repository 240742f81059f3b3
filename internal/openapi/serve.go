package openapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync"

	"github.com/flowplane/flowplane/internal/httpapi"
)

// Handler serves the document build returns, built once at the first
// request (a route table may then hold the route serving it), with a
// strong ETag and Cache-Control: no-cache, so a client revalidates
// (If-None-Match, 304) instead of downloading it again.
func Handler(build func() ([]byte, error)) httpapi.HandlerFunc {
	var (
		once sync.Once
		doc  []byte
		etag string
		err  error
	)
	return func(w http.ResponseWriter, r *http.Request) error {
		once.Do(func() {
			doc, err = build()
			sum := sha256.Sum256(doc)
			etag = `"` + hex.EncodeToString(sum[:16]) + `"`
		})
		if err != nil {
			return err
		}
		h := w.Header()
		h.Set("ETag", etag)
		h.Set("Cache-Control", "private, no-cache")
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
		h.Set("Content-Type", httpapi.MediaTypeJSON)
		w.WriteHeader(http.StatusOK)
		_, werr := w.Write(doc)
		return werr
	}
}

// Doc is the route documentation of the route serving a document.
func Doc(tag string) httpapi.Doc {
	return httpapi.Doc{Summary: "This API's OpenAPI 3.1 document", Tag: tag, Response: Document{}, Also: []int{http.StatusNotModified}}
}

// Document is the top level of an OpenAPI document, as far as the route
// serving it describes its body.
type Document struct {
	OpenAPI    string         `json:"openapi"`
	Info       map[string]any `json:"info"`
	Paths      map[string]any `json:"paths"`
	Components map[string]any `json:"components"`
}
