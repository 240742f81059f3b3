package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// Path is where the Hub serves the console; "/" redirects here.
const Path = "/ui/"

// CSP is the console's Content-Security-Policy: its own files and the
// operator API on the same origin, nothing inline, no frames, no other
// origin.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed dist
var dist embed.FS

type file struct {
	body  []byte
	ctype string
	etag  string
}

// Site is the embedded console, ready to serve.
type Site struct {
	files map[string]file
}

// Config is what the console reads before its first call, served at
// Path+"hub.json". It holds nothing secret.
type Config struct {
	APIPrefix string `json:"api_prefix"`
	// SignIn, when set, offers the sign-in through the Hub's identity
	// provider beside the token sign-in.
	SignIn *SignIn `json:"sign_in,omitempty"`
}

// SignIn names the identity provider and the Hub's sign-in paths.
type SignIn struct {
	Provider string `json:"provider"`
	Login    string `json:"login"`
	Logout   string `json:"logout"`
}

// New loads the embedded console and serves cfg at Path+"hub.json".
func New(cfg Config) *Site {
	s := &Site{files: map[string]file{}}
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		s.files[p] = newFile(b, mime.TypeByExtension(path.Ext(p)))
		return nil
	})
	if err != nil {
		panic(err) // an embedded file system does not fail to read
	}
	info, _ := json.Marshal(cfg)
	s.files["hub.json"] = newFile(info, "application/json")
	if f, ok := s.files["index.html"]; ok {
		s.files[""] = f
	}
	return s
}

// lookup finds the file urlPath (under Path) names.
func (s *Site) lookup(urlPath string) (file, bool) {
	name, ok := strings.CutPrefix(urlPath, Path)
	f, found := s.files[name]
	return f, ok && found
}

// Header sets the security headers of every console answer.
func Header(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// Serve answers a GET or HEAD for one file of the console and reports
// whether there was one; when there was not, it has written nothing but the
// security headers, and the caller answers in its own error format.
func (s *Site) Serve(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	Header(h)
	f, ok := s.lookup(r.URL.Path)
	if !ok {
		return false
	}
	h.Set("Content-Type", f.ctype)
	// Names carry no content hash: revalidate every time, answered 304
	// while the build is the same.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
	return true
}

// notFoundPage is the console's 404 page: a mistyped console URL says so
// and links to the console. Its style is the console's own file (the CSP
// allows no inline style).
const notFoundPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>Not found · flowplane console</title>
<link rel="stylesheet" href="` + Path + `assets/app.css">
</head>
<body>
<main class="login" data-page="not-found">
<h1>flowplane</h1>
<div class="notice warn" role="alert" data-state="not-found">No console page at <code>%s</code> (404).</div>
<p><a class="button primary" href="` + Path + `">Open the console</a></p>
</main>
</body>
</html>
`

// NotFound answers a request for a path under Path that names no file
// with the console's 404 page (status 404), for a client that accepts
// HTML (a browser); it reports false, having written nothing but the
// security headers, for any other client, which the caller answers in its
// own error format (the API's problem).
func (s *Site) NotFound(w http.ResponseWriter, r *http.Request) bool {
	Header(w.Header())
	if !strings.Contains(r.Header.Get("Accept"), "text/html") {
		return false
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusNotFound)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, notFoundPage, html.EscapeString(r.URL.Path))
	}
	return true
}

func newFile(b []byte, ctype string) file {
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	sum := sha256.Sum256(b)
	return file{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}
