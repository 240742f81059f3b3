package console

import (
	"bytes"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDistMatchesSource rebuilds the console from its sources in a copy of
// this directory (npm ci, then npm run build: type check and bundle) and
// requires the result to be byte for byte the committed dist/, which is
// what the Hub embeds. A change to src/ without a rebuild fails here.
func TestDistMatchesSource(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the console's npm packages and builds it")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed (apt-get install nodejs npm); .ci/run installs it")
	}
	work := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "tsconfig.json", "build.mjs", "index.html"} {
		copyFile(t, f, filepath.Join(work, f))
	}
	err = filepath.WalkDir("src", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		copyFile(t, p, filepath.Join(work, p))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"ci", "--no-audit", "--no-fund", "--loglevel=error"}, {"run", "build"}} {
		cmd := exec.Command(npm, args...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm %v: %v\n%s", args, err, out)
		}
	}
	want := tree(t, "dist")
	got := tree(t, filepath.Join(work, "dist"))
	for name, b := range got {
		if w, ok := want[name]; !ok {
			t.Errorf("the build makes dist/%s, which is not committed", name)
		} else if !bytes.Equal(w, b) {
			t.Errorf("dist/%s differs from a build of the sources: run `npm run build` in web/console and commit dist/", name)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("dist/%s is committed but the build does not make it", name)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tree reads every file under dir, by path relative to it.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSiteFiles checks what the Site serves and refuses.
func TestSiteFiles(t *testing.T) {
	s := New(Config{APIPrefix: "/api/v2"})
	for _, tc := range []struct {
		path string
		want bool
	}{
		{Path, true}, {Path + "index.html", true}, {Path + "assets/app.js", true}, {Path + "assets/app.css", true},
		{Path + "hub.json", true}, {Path + "assets/", false}, {Path + "../console.go", false}, {"/other/", false}, {Path + "nope", false},
	} {
		if _, got := s.lookup(tc.path); got != tc.want {
			t.Errorf("lookup(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
	if got := string(s.files["hub.json"].body); got != `{"api_prefix":"/api/v2"}` {
		t.Errorf("hub.json %s", got)
	}
	s = New(Config{APIPrefix: "/api/v1", SignIn: &SignIn{Provider: "idp.example", Login: "/ui/auth/login", Logout: "/ui/auth/logout"}})
	want := `{"api_prefix":"/api/v1","sign_in":{"provider":"idp.example","login":"/ui/auth/login","logout":"/ui/auth/logout"}}`
	if got := string(s.files["hub.json"].body); got != want {
		t.Errorf("hub.json with sign-in %s", got)
	}
}

// TestNotFound: a browser asking for a console path that names no file
// gets the console's 404 page (HTML, status 404, the path escaped, the
// console's security headers); another client gets nothing written, for
// the caller's own error format.
func TestNotFound(t *testing.T) {
	s := New(Config{APIPrefix: "/api/v1"})
	for _, tc := range []struct {
		accept string
		served bool
	}{
		{"text/html,application/xhtml+xml,*/*;q=0.8", true},
		{"application/json", false},
		{"", false},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", Path+"unknown<b>", nil)
		r.Header.Set("Accept", tc.accept)
		got := s.NotFound(w, r)
		if got != tc.served {
			t.Fatalf("Accept %q: served %v, want %v", tc.accept, got, tc.served)
		}
		if w.Header().Get("Content-Security-Policy") != CSP {
			t.Errorf("Accept %q: no CSP", tc.accept)
		}
		if !tc.served {
			if w.Body.Len() != 0 {
				t.Errorf("Accept %q: wrote %q", tc.accept, w.Body.String())
			}
			continue
		}
		body := w.Body.String()
		if w.Code != http.StatusNotFound || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") ||
			!strings.Contains(body, `data-page="not-found"`) || !strings.Contains(body, "unknown&lt;b&gt;") || strings.Contains(body, "unknown<b>") {
			t.Errorf("Accept %q: %d %q %s", tc.accept, w.Code, w.Header().Get("Content-Type"), body)
		}
	}
}
