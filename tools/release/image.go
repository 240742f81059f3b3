package main

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, and no login. 65532 is the "nonroot" of
// distroless images, so volumes prepared for those fit.
const (
	imageUID  = 65532
	imageHome = "var/lib/flowplane"
)

// imageSpec is what an image is made of and labelled with.
type imageSpec struct {
	binary   string // the static linux binary
	caCerts  string // a PEM bundle, installed at /etc/ssl/certs/ca-certificates.crt
	arch     string
	version  string
	revision string // the commit
	source   string // where the source is
	tag      string // the name podman load gives it, e.g. flowplane:v0.7.0
	date     time.Time
}

// writeImage writes an OCI image archive (an OCI image layout in a tar, as
// `podman load -i` reads it) of spec at path: from scratch, one layer with
// the binary at /usr/local/bin/flowplane, the CA certificates, a passwd
// and group naming the non-root user, its home /var/lib/flowplane (the
// state directory, a volume) and /tmp; the user 65532, the OCI
// annotations and labels of version, revision, source and creation. Every
// time in it is spec.date, so it rebuilds to the same bytes.
func writeImage(path string, spec imageSpec) error {
	layerTar, err := imageLayer(spec)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: spec.date}, CreatedBy: "flowplane tools/release", Comment: "flowplane " + spec.version}})
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	annotations := map[string]string{
		"org.opencontainers.image.title":       "flowplane",
		"org.opencontainers.image.description": "flowplane streaming-data engine, Agent and Hub",
		"org.opencontainers.image.version":     spec.version,
		"org.opencontainers.image.revision":    spec.revision,
		"org.opencontainers.image.source":      spec.source,
		"org.opencontainers.image.created":     spec.date.UTC().Format(time.RFC3339),
	}
	cfg.OS, cfg.Architecture = "linux", spec.arch
	cfg.Created = v1.Time{Time: spec.date}
	cfg.Config = v1.Config{
		User:       "65532:65532",
		Entrypoint: []string{"/usr/local/bin/flowplane"},
		Cmd:        []string{"--help"},
		WorkingDir: "/" + imageHome,
		Env: []string{
			"PATH=/usr/local/bin",
			// The Hub's SQLite file in the state volume; a PostgreSQL URL
			// given with -e replaces it.
			"SVC_HUB_STORAGE=/" + imageHome + "/hub.db",
		},
		Volumes:      map[string]struct{}{"/" + imageHome: {}},
		ExposedPorts: map[string]struct{}{"8090/tcp": {}}, // the Hub's port
		Labels:       annotations,
		StopSignal:   "SIGTERM",
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	img, ok := mutate.Annotations(img, annotations).(v1.Image)
	if !ok {
		panic("mutate.Annotations of an image is an image")
	}
	dir, err := os.MkdirTemp("", "image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": spec.tag})); err != nil {
		return err
	}
	return tarDir(path, dir, spec.date)
}

// imageLayer is the image's one layer, as an uncompressed tar.
func imageLayer(spec imageSpec) ([]byte, error) {
	bin, err := os.ReadFile(spec.binary)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(spec.caCerts)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entry := func(name string, mode int64, uid int, data []byte) error {
		h := &tar.Header{Name: name, Mode: mode, Uid: uid, Gid: uid, ModTime: spec.date.UTC(), Format: tar.FormatPAX}
		if data == nil {
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, e := range []struct {
		name string
		mode int64
		uid  int
		data []byte
	}{
		{"etc", 0o755, 0, nil},
		{"etc/group", 0o644, 0, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{"etc/passwd", 0o644, 0, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/" + imageHome + ":/sbin/nologin\n")},
		{"etc/ssl", 0o755, 0, nil},
		{"etc/ssl/certs", 0o755, 0, nil},
		{"etc/ssl/certs/ca-certificates.crt", 0o644, 0, ca},
		{"tmp", 0o1777, 0, nil},
		{"usr", 0o755, 0, nil},
		{"usr/local", 0o755, 0, nil},
		{"usr/local/bin", 0o755, 0, nil},
		{"usr/local/bin/flowplane", 0o755, 0, bin},
		{"var", 0o755, 0, nil},
		{"var/lib", 0o755, 0, nil},
		{imageHome, 0o700, imageUID, nil},
	} {
		if err := entry(e.name, e.mode, e.uid, e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir into a tar at path, in name order,
// with fixed times and no owners.
func tarDir(path, dir string, date time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: date.UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		var data []byte
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
		} else if data, err = os.ReadFile(p); err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
