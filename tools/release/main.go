// Command release builds flowplane's release archives: for each target a
// static binary built with -trimpath and stamped with the version (the
// commit and its time come from the build's VCS stamp), packed with the
// README and the systemd units into a tar.gz whose every byte depends only
// on the commit; a CycloneDX SBOM of the modules linked into each binary;
// with -image an OCI image archive for each linux target (image.go); and
// SHA256SUMS over all of them. The same commit gives the same bytes
// (docs/deploy.md, "Release builds").
//
// Usage:
//
//	go run ./tools/release -version v0.7.0 -out dist/release
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// defaultTargets are the platforms of a release.
const defaultTargets = "linux/amd64,linux/arm64,darwin/arm64"

// options is one release build.
type options struct {
	version string
	pkg     string    // the main package built
	name    string    // the binary's and archives' name
	targets []string  // GOOS/GOARCH
	date    time.Time // every archive entry's time: the commit's
	extra   []string  // files packed beside the binary, relative to the module root
	out     string
	// image adds an OCI image archive for each linux target, with the
	// CA certificates of caCerts and the commit revision.
	image    bool
	caCerts  string
	revision string
}

func main() {
	var o options
	var targets string
	flag.StringVar(&o.version, "version", "", "the release version, stamped as main.version and in the file names (required)")
	flag.StringVar(&o.pkg, "pkg", "./cmd/flowplane", "the main package to build")
	flag.StringVar(&o.name, "name", "flowplane", "the binary's name")
	flag.StringVar(&targets, "targets", defaultTargets, "comma-separated GOOS/GOARCH pairs")
	flag.StringVar(&o.out, "out", "dist/release", "output directory (emptied first)")
	flag.BoolVar(&o.image, "image", false, "also write an OCI image archive (podman load -i) for each linux target")
	flag.StringVar(&o.caCerts, "ca", "/etc/ssl/certs/ca-certificates.crt", "with -image: the CA certificates the image carries")
	flag.Parse()
	if o.version == "" || strings.ContainsAny(o.version, "/ \t") {
		fmt.Fprintln(os.Stderr, "release: -version is required, without '/' or spaces (e.g. -version v0.7.0)")
		os.Exit(2)
	}
	o.targets = strings.Split(targets, ",")
	o.extra = []string{"README.md", "deploy/systemd/flowplane-hub.service", "deploy/systemd/flowplane-node.service"}
	ctx := context.Background()
	date, err := commitTime(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	o.date = date
	if o.revision, err = revision(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	files, err := build(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Println(filepath.Join(o.out, f))
	}
}

// commitTime is the time of the commit checked out: the one time stamped
// into the archives, so that rebuilding the commit gives the same bytes.
func commitTime(ctx context.Context) (time.Time, error) {
	out, err := exec.CommandContext(ctx, "git", "log", "-1", "--format=%cI").Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("the commit's time (git log): %w", err)
	}
	return time.Parse(time.RFC3339, strings.TrimSpace(string(out)))
}

// revision is the commit checked out.
func revision(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("the commit (git rev-parse): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// build makes o's archives, SBOMs and SHA256SUMS in o.out and returns
// their names.
func build(ctx context.Context, o options) ([]string, error) {
	if err := os.RemoveAll(o.out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var files []string
	for _, target := range o.targets {
		goos, goarch, ok := strings.Cut(target, "/")
		if !ok || goos == "" || goarch == "" {
			return nil, fmt.Errorf("target %q: want GOOS/GOARCH", target)
		}
		base := fmt.Sprintf("%s_%s_%s_%s", o.name, o.version, goos, goarch)
		bin := filepath.Join(tmp, base, o.name)
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=auto",
			"-ldflags", "-s -w -buildid= -X main.version="+o.version, "-o", bin, o.pkg)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %w\n%s", target, err, out)
		}
		archive := base + ".tar.gz"
		if err := pack(filepath.Join(o.out, archive), base, bin, o.name, o.extra, o.date); err != nil {
			return nil, fmt.Errorf("pack %s: %w", target, err)
		}
		sbom := base + ".cdx.json"
		if err := writeSBOM(filepath.Join(o.out, sbom), bin, o.version, target, o.date); err != nil {
			return nil, fmt.Errorf("SBOM of %s: %w", target, err)
		}
		files = append(files, archive, sbom)
		if o.image && goos == "linux" {
			image := base + ".oci.tar"
			spec := imageSpec{binary: bin, caCerts: o.caCerts, arch: goarch, version: o.version, revision: o.revision,
				source: "https://github.com/flowplane/flowplane", tag: o.name + ":" + o.version, date: o.date}
			if err := writeImage(filepath.Join(o.out, image), spec); err != nil {
				return nil, fmt.Errorf("image of %s: %w", target, err)
			}
			files = append(files, image)
		}
	}
	if err := writeSums(o.out, files); err != nil {
		return nil, err
	}
	return append(files, "SHA256SUMS"), nil
}

// pack writes a gzipped tar of the binary and the extra files under the
// directory dir, with fixed owners, modes and times and no gzip name or
// time: its bytes depend only on the files' contents and date.
func pack(path, dir, bin, name string, extra []string, date time.Time) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf) // a zero header: no name, no time
	tw := tar.NewWriter(zw)
	add := func(name, src string, mode int64) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: dir + "/" + name, Mode: mode, Size: int64(len(b)), ModTime: date.UTC(),
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	}
	if err := add(name, bin, 0o755); err != nil {
		return err
	}
	sorted := slices.Clone(extra)
	slices.Sort(sorted)
	for _, f := range sorted {
		if err := add(filepath.ToSlash(f), f, 0o644); err != nil {
			return err
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// writeSums writes SHA256SUMS in dir over files, in the format sha256sum
// -c reads.
func writeSums(dir string, files []string) error {
	sorted := slices.Clone(files)
	slices.Sort(sorted)
	var b strings.Builder
	for _, f := range sorted {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// writeSBOM writes a CycloneDX 1.5 SBOM of the binary at bin: the main
// module and every module linked into it, as its build info records them
// (the module graph pruned to what the binary contains), and the Go
// toolchain. Its serial number derives from the binary's digest and its
// time is the commit's, so that it too rebuilds to the same bytes.
func writeSBOM(path, bin, version, target string, date time.Time) error {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(data)
	type hash struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	}
	type component struct {
		Type    string `json:"type"`
		BOMRef  string `json:"bom-ref"`
		Name    string `json:"name"`
		Version string `json:"version"`
		PURL    string `json:"purl,omitempty"`
		Hashes  []hash `json:"hashes,omitempty"`
	}
	purl := func(path, version string) string { return "pkg:golang/" + path + "@" + version }
	main := component{Type: "application", Name: bi.Main.Path, Version: version, BOMRef: purl(bi.Main.Path, version),
		PURL:   purl(bi.Main.Path, version) + "?goos=" + strings.Replace(target, "/", "&goarch=", 1),
		Hashes: []hash{{Alg: "SHA-256", Content: hex.EncodeToString(digest[:])}}}
	var comps []component
	var refs []string
	for _, d := range bi.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		c := component{Type: "library", Name: m.Path, Version: m.Version, BOMRef: purl(m.Path, m.Version), PURL: purl(m.Path, m.Version)}
		comps = append(comps, c)
		refs = append(refs, c.BOMRef)
	}
	goRef := "pkg:golang/std@" + bi.GoVersion
	comps = append(comps, component{Type: "library", Name: "std", Version: bi.GoVersion, BOMRef: goRef, PURL: goRef})
	refs = append(refs, goRef)
	serial := digest[:16]
	serial[6] = serial[6]&0x0f | 0x50 // a name-based (SHA) UUID, RFC 9562 version 5 layout
	serial[8] = serial[8]&0x3f | 0x80
	uuid := fmt.Sprintf("%x-%x-%x-%x-%x", serial[0:4], serial[4:6], serial[6:8], serial[8:10], serial[10:16])
	doc := map[string]any{
		"bomFormat":    "CycloneDX",
		"specVersion":  "1.5",
		"serialNumber": "urn:uuid:" + uuid,
		"version":      1,
		"metadata": map[string]any{
			"timestamp": date.UTC().Format(time.RFC3339),
			"component": main,
			"tools":     map[string]any{"components": []component{{Type: "application", Name: "flowplane tools/release", Version: version, BOMRef: "tools/release"}}},
		},
		"components":   comps,
		"dependencies": []map[string]any{{"ref": main.BOMRef, "dependsOn": refs}},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
