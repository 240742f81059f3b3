package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestReleaseReproducible builds the release of a small program, with its
// container image, twice, into two directories, and checks that every file is the
// same bytes both times; that SHA256SUMS is right about every file (as
// sha256sum -c would check it); that each archive holds the binary
// (mode 0755) and the extra files, all at the commit's time and owned by
// no one; and that each SBOM is CycloneDX naming the binary's digest.
func TestReleaseReproducible(t *testing.T) {
	date := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	opts := func(out string) options {
		return options{version: "v9.9.9-test", pkg: "./testdata/hello", name: "hello",
			targets: []string{"linux/amd64"}, date: date, extra: []string{"testdata/hello/main.go"}, out: out,
			image: true, caCerts: "testdata/ca.pem", revision: "0123456789abcdef0123456789abcdef01234567"}
	}
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	filesA, err := build(context.Background(), opts(a))
	if err != nil {
		t.Fatal(err)
	}
	filesB, err := build(context.Background(), opts(b))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hello_v9.9.9-test_linux_amd64.tar.gz", "hello_v9.9.9-test_linux_amd64.cdx.json", "hello_v9.9.9-test_linux_amd64.oci.tar", "SHA256SUMS"}
	if strings.Join(filesA, " ") != strings.Join(want, " ") || strings.Join(filesB, " ") != strings.Join(want, " ") {
		t.Fatalf("files %v and %v, want %v", filesA, filesB, want)
	}
	for _, f := range want {
		x, err1 := os.ReadFile(filepath.Join(a, f))
		y, err2 := os.ReadFile(filepath.Join(b, f))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same commit", f)
		}
	}

	sums, err := os.ReadFile(filepath.Join(a, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(sums), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("SHA256SUMS has %d lines:\n%s", len(lines), sums)
	}
	for _, l := range lines {
		sum, name, ok := strings.Cut(l, "  ")
		data, err := os.ReadFile(filepath.Join(a, name))
		if !ok || err != nil {
			t.Fatalf("SHA256SUMS line %q: %v", l, err)
		}
		got := sha256.Sum256(data)
		if hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file is %x", name, sum, got)
		}
	}

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"linux_amd64"} {
		base := "hello_v9.9.9-test_" + target
		entries := untar(t, filepath.Join(a, base+".tar.gz"))
		bin, ok := entries[base+"/hello"]
		if !ok || bin.mode != 0o755 || len(bin.data) == 0 {
			t.Fatalf("%s: binary entry %+v (present %v)", target, bin.hdr, ok)
		}
		if src, ok := entries[base+"/testdata/hello/main.go"]; !ok || src.mode != 0o644 {
			t.Fatalf("%s: extra file missing or mode %o", target, src.mode)
		}
		for name, e := range entries {
			if !e.hdr.ModTime.Equal(date) || e.hdr.Uid != 0 || e.hdr.Gid != 0 || e.hdr.Uname != "" || e.hdr.Gname != "" {
				t.Errorf("%s: %s has time %v, owner %d:%d %q:%q", target, name, e.hdr.ModTime, e.hdr.Uid, e.hdr.Gid, e.hdr.Uname, e.hdr.Gname)
			}
		}
		if !bytes.Contains(bin.data, []byte("v9.9.9-test")) {
			t.Errorf("%s: the binary does not carry its version", target)
		}
		if bytes.Contains(bin.data, []byte(wd)) {
			t.Errorf("%s: the binary holds the build directory %s (built without -trimpath?)", target, wd)
		}
		var sbom struct {
			BOMFormat, SpecVersion, SerialNumber string
			Metadata                             struct {
				Timestamp string
				Component struct {
					Name, Version, PURL string
					Hashes              []struct{ Alg, Content string }
				}
			}
			Components []struct{ Name, Version, PURL string }
		}
		raw, err := os.ReadFile(filepath.Join(a, base+".cdx.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &sbom); err != nil {
			t.Fatal(err)
		}
		digest := sha256.Sum256(bin.data)
		c := sbom.Metadata.Component
		if sbom.BOMFormat != "CycloneDX" || sbom.SpecVersion != "1.5" || !strings.HasPrefix(sbom.SerialNumber, "urn:uuid:") ||
			c.Name != "github.com/flowplane/flowplane" || c.Version != "v9.9.9-test" || len(c.Hashes) != 1 ||
			c.Hashes[0].Content != hex.EncodeToString(digest[:]) || sbom.Metadata.Timestamp != "2026-11-28T12:00:00Z" {
			t.Errorf("%s: SBOM %+v", target, sbom)
		}
		if n := len(sbom.Components); n == 0 || sbom.Components[n-1].Name != "std" {
			t.Errorf("%s: SBOM components %+v, want the Go standard library last", target, sbom.Components)
		}
	}
	checkImage(t, filepath.Join(a, "hello_v9.9.9-test_linux_amd64.oci.tar"), date)
}

type entry struct {
	hdr  *tar.Header
	mode int64
	data []byte
}

func untar(t *testing.T, path string) map[string]entry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("%s: gzip header names %q at %v", path, zr.Name, zr.ModTime)
	}
	out := map[string]entry{}
	for _, e := range tarEntries(t, zr) {
		out[e.hdr.Name] = e
	}
	return out
}

// tarEntries reads every entry of the tar r, in order.
func tarEntries(t *testing.T, r io.Reader) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{hdr: h, mode: h.Mode, data: data})
	}
}

// checkImage reads the container image of a release (built at date) back
// as an OCI image layout: its reference name, annotations, configuration
// (non-root user, entrypoint, state volume, labels) and its one layer's
// files, owners and modes.
func checkImage(t *testing.T, path string, date time.Time) {
	t.Helper()
	img, ref := loadImage(t, path)
	if ref != "hello:v9.9.9-test" {
		t.Errorf("reference name %q", ref)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.version":  "v9.9.9-test",
		"org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
		"org.opencontainers.image.source":   "https://github.com/flowplane/flowplane",
		"org.opencontainers.image.created":  "2026-11-28T12:00:00Z",
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range wantLabels {
		if m.Annotations[k] != v || cfg.Config.Labels[k] != v {
			t.Errorf("%s: annotation %q, label %q, want %q", k, m.Annotations[k], cfg.Config.Labels[k], v)
		}
	}
	c := cfg.Config
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || c.User != "65532:65532" || strings.Join(c.Entrypoint, " ") != "/usr/local/bin/flowplane" ||
		c.WorkingDir != "/var/lib/flowplane" || len(c.Volumes) != 1 || !cfg.Created.Time.Equal(date) {
		t.Errorf("config %+v", cfg)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d: %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	type file struct {
		mode     int64
		uid, gid int
		size     int64
	}
	got := map[string]file{}
	for _, e := range tarEntries(t, rc) {
		h := e.hdr
		got[h.Name] = file{h.Mode, h.Uid, h.Gid, h.Size}
		if !h.ModTime.Equal(date) {
			t.Errorf("%s at %v", h.Name, h.ModTime)
		}
	}
	ca, _ := os.Stat("testdata/ca.pem")
	for name, want := range map[string]file{
		"usr/local/bin/flowplane":           {0o755, 0, 0, -1},
		"etc/ssl/certs/ca-certificates.crt": {0o644, 0, 0, ca.Size()},
		"etc/passwd":                        {0o644, 0, 0, -1},
		"var/lib/flowplane/":                {0o700, 65532, 65532, 0},
		"tmp/":                              {0o1777, 0, 0, 0},
	} {
		g, ok := got[name]
		if want.size == -1 {
			want.size = g.size
		}
		if !ok || g != want {
			t.Errorf("%s: %+v (present %v), want %+v", name, g, ok, want)
		}
	}
	if len(got) != 14 {
		t.Errorf("the layer holds %d entries, want 14: %v", len(got), got)
	}
}

// loadImage reads the one image of an OCI image archive and its
// reference name.
func loadImage(t *testing.T, path string) (v1.Image, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range tarEntries(t, f) {
		p := filepath.Join(dir, filepath.FromSlash(e.hdr.Name))
		if e.hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, e.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index: %+v, %v", im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, im.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
}
