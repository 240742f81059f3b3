package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
	"golang.org/x/sync/errgroup"

	"github.com/flowplane/flowplane/internal/sandbox"
)

// Artifact store layout, under the object_store_uri:
//
//	<job id>/<kind>s/<id, 20 digits>/_manifest.json     the commit point, written last
//	<job id>/<kind>s/<id, 20 digits>/<task path>/...    task artifacts (Pebble checkpoint files)
//
// Ids are zero-padded so that keys sort by id. An id prefix without a
// manifest is incomplete: List skips it and CleanIncomplete removes it.
const manifestName = "_manifest.json"

// transfers is how many files Upload and Download move at once: object
// stores serve one stream per request, so a few in flight use the link.
const transfers = 4

// Artifacts is a job's artifact store under one object_store_uri.
type Artifacts struct {
	bucket *blob.Bucket
	uri    string // for errors; without the query, which may hold secrets
	// fs is how the local directories uploaded from and downloaded into
	// are reached; release lets go of what the bucket holds open.
	fs      sandbox.FS
	release func() error
	// root is the directory of a file:// store, whose objects are made
	// 0600 once written (fileblob creates them 0666 less the umask);
	// empty for s3.
	root string
}

// OpenArtifacts opens the store at uri (file:// or s3://), as OpenBucket
// does with create set.
func OpenArtifacts(ctx context.Context, uri string) (*Artifacts, error) {
	return OpenArtifactsIn(ctx, uri, sandbox.FS{}, sandbox.FS{})
}

// OpenArtifactsIn is OpenArtifacts for a job whose files are reached
// through a sandbox (a Hub job's: the node's remote policy at use): a
// file:// store as OpenBucketIn opens it with store, the local
// directories Upload reads and Download writes through files (a Hub
// job's task directories: confined when its state.root came with it, not
// when they are the node's own).
func OpenArtifactsIn(ctx context.Context, uri string, store, files sandbox.FS) (*Artifacts, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("state: object store uri: %w", err)
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	if u.Scheme != fileblob.Scheme && u.Scheme != s3blob.Scheme {
		return nil, fmt.Errorf("state: object store uri %s: scheme %q is not file or s3", shown, u.Scheme)
	}
	b, dir, release, err := openBucket(ctx, u, true, store)
	if err != nil {
		return nil, fmt.Errorf("state: open object store %s: %w", shown, err)
	}
	return &Artifacts{bucket: b, uri: shown, fs: files, release: release, root: dir}, nil
}

// private narrows a file:// object just written to 0600: checkpoints hold
// the job's state, which is the node owner's alone.
func (a *Artifacts) private(key string) error {
	if a.root == "" {
		return nil
	}
	return os.Chmod(filepath.Join(a.root, filepath.FromSlash(key)), 0o600)
}

// OpenBucket opens the bucket of a file:// or s3:// URL the way flowplane
// opens every object store (checkpoints and the object_store connector).
// A file:// bucket writes no metadata sidecar files and writes temporary
// files next to their objects (so the final rename stays on one file
// system), and creates its directory when create is set, unless the URL
// says otherwise (create_dir, metadata, no_tmp_dir). The path of an s3://
// URL is a key prefix in the bucket; its query takes gocloud.dev's s3blob
// parameters (region, endpoint, use_path_style, ...), and with an endpoint
// responses are checked for checksums only when the request asked for them
// (S3-compatible servers often send none, and the SDK then warns on
// stderr for every object read). Credentials come from the standard AWS
// environment. u is not modified.
func OpenBucket(ctx context.Context, u *url.URL, create bool) (*blob.Bucket, error) {
	b, _, _, err := openBucket(ctx, u, create, sandbox.FS{})
	return b, err
}

// OpenBucketIn is OpenBucket with a file:// bucket's directory reached
// through fsys. Confined (the Hub's work), the directory is made through
// it and its parent pinned (sandbox.FS.PinParent) while the bucket is
// open, so that no directory above the bucket's can be swapped for a
// link out of the root; release, called after the bucket is closed, lets
// it go.
func OpenBucketIn(ctx context.Context, u *url.URL, create bool, fsys sandbox.FS) (*blob.Bucket, func() error, error) {
	b, _, release, err := openBucket(ctx, u, create, fsys)
	return b, release, err
}

// openBucket is OpenBucketIn, also returning the directory a file://
// bucket was opened at (empty for s3).
func openBucket(ctx context.Context, u *url.URL, create bool, fsys sandbox.FS) (b *blob.Bucket, dir string, release func() error, err error) {
	release = func() error { return nil }
	v := *u
	q := v.Query()
	set := func(k, val string) {
		if !q.Has(k) {
			q.Set(k, val)
		}
	}
	switch v.Scheme {
	case fileblob.Scheme:
		if create {
			set("create_dir", "true")
		}
		// Directories private unless the URL opens them
		// (?dir_file_mode=0755); fileblob's default is 0777.
		set("dir_file_mode", "0700")
		set("metadata", "skip")
		set("no_tmp_dir", "true")
		v.RawQuery = q.Encode()
		dir = filepath.FromSlash(v.Path)
		if fsys.Confined() {
			if create {
				if err := fsys.MkdirAll(dir, 0o700); err != nil {
					return nil, "", nil, err
				}
			}
			if dir, release, err = fsys.PinParent(dir); err != nil {
				return nil, "", nil, err
			}
			v.Path = filepath.ToSlash(dir)
		}
		b, err := blob.OpenBucket(ctx, v.String())
		if err != nil {
			_ = release()
			return nil, "", nil, err
		}
		return b, dir, release, nil
	case s3blob.Scheme:
		prefix := strings.Trim(v.Path, "/")
		v.Path = ""
		if q.Has("endpoint") {
			set("response_checksum_validation", "when_required")
			v.RawQuery = q.Encode()
		}
		b, err := blob.OpenBucket(ctx, v.String())
		if err == nil && prefix != "" {
			b = blob.PrefixedBucket(b, prefix+"/")
		}
		return b, "", release, err
	default:
		return nil, "", nil, fmt.Errorf("scheme %q is not file or s3", v.Scheme)
	}
}

// Prefix is where the task artifacts of an artifact go: a key prefix that
// sorts by kind and id under the job. It ends with a slash.
func Prefix(jobID, kind string, id int64) string {
	return fmt.Sprintf("%s/%ss/%020d/", jobID, kind, id)
}

// Upload copies every file under dir to key prefix prefix (a slash is
// added if prefix lacks one), streaming, and returns the bytes copied.
func (a *Artifacts) Upload(ctx context.Context, prefix, dir string) (bytes int64, err error) {
	prefix = withSlash(prefix)
	var files []string
	err = a.fs.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		} else if !d.IsDir() {
			return fmt.Errorf("%s is not a regular file", p)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("state: upload %s: %w", dir, err)
	}
	sizes := make([]int64, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(transfers)
	for i, p := range files {
		g.Go(func() error {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			sizes[i], err = a.uploadFile(gctx, prefix+filepath.ToSlash(rel), p)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("state: upload %s to %s: %w", dir, a.uri, err)
	}
	for _, n := range sizes {
		bytes += n
	}
	return bytes, nil
}

func (a *Artifacts) uploadFile(ctx context.Context, key, file string) (int64, error) {
	f, err := a.fs.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel() // cancelling before Close aborts the write
	w, err := a.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, f)
	if err != nil {
		cancel()
		w.Close()
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	if err := a.private(key); err != nil {
		return 0, err
	}
	return n, nil
}

// Download copies every object under prefix into dir, which must not
// exist yet.
func (a *Artifacts) Download(ctx context.Context, prefix, dir string) error {
	prefix = withSlash(prefix)
	if _, err := a.fs.Lstat(dir); err == nil {
		return fmt.Errorf("state: download %s into %s: the directory already exists", prefix, dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: download into %s: %w", dir, err)
	}
	if err := a.fs.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state: download into %s: %w", dir, err)
	}
	keys, err := a.keys(ctx, prefix)
	if err != nil {
		return fmt.Errorf("state: download %s from %s: %w", prefix, a.uri, err)
	}
	if len(keys) == 0 {
		return fmt.Errorf("state: download %s from %s: no objects under the prefix", prefix, a.uri)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(transfers)
	for _, key := range keys {
		rel := strings.TrimPrefix(key, prefix)
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return fmt.Errorf("state: download %s: object %q would land outside %s", prefix, key, dir)
		}
		g.Go(func() error { return a.downloadFile(gctx, key, filepath.Join(dir, filepath.FromSlash(rel))) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("state: download %s from %s: %w", prefix, a.uri, err)
	}
	return nil
}

func (a *Artifacts) downloadFile(ctx context.Context, key, file string) error {
	if err := a.fs.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	r, err := a.bucket.NewReader(ctx, key, nil)
	if err != nil {
		return err
	}
	defer r.Close()
	f, err := a.fs.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", key, err)
	}
	return f.Close()
}

// keys lists every object key under prefix, directory markers excluded.
func (a *Artifacts) keys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	it := a.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return keys, nil
		}
		if err != nil {
			return nil, err
		}
		if !obj.IsDir && !strings.HasSuffix(obj.Key, "/") {
			keys = append(keys, obj.Key)
		}
	}
}

// Commit writes m's manifest; once it returns nil the artifact is complete.
// Both drivers make the object appear whole or not at all.
func (a *Artifacts) Commit(ctx context.Context, m *Manifest) error {
	if err := checkKind(m.Kind); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("state: commit manifest: %w", err)
	}
	key := Prefix(m.JobID, m.Kind, m.ID) + manifestName
	err = a.bucket.WriteAll(ctx, key, data, &blob.WriterOptions{ContentType: "application/json"})
	if err == nil {
		err = a.private(key)
	}
	if err != nil {
		return fmt.Errorf("state: commit manifest %s to %s: %w", key, a.uri, err)
	}
	return nil
}

func checkKind(kind string) error {
	if kind != KindCheckpoint && kind != KindSavepoint {
		return fmt.Errorf("state: artifact kind %q is not %s or %s", kind, KindCheckpoint, KindSavepoint)
	}
	return nil
}

// artifactIDs lists the ids of the artifact prefixes of kind for the job,
// complete or not, in ascending order.
func (a *Artifacts) artifactIDs(ctx context.Context, jobID, kind string) ([]int64, error) {
	parent := jobID + "/" + kind + "s/"
	it := a.bucket.List(&blob.ListOptions{Prefix: parent, Delimiter: "/"})
	var ids []int64
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if !obj.IsDir {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(obj.Key, parent), "/")
		id, err := strconv.ParseInt(name, 10, 64)
		if err != nil || len(name) != 20 {
			continue // not ours
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// manifest reads the manifest of an artifact; nil when it has none.
func (a *Artifacts) manifest(ctx context.Context, jobID, kind string, id int64) (*Manifest, error) {
	key := Prefix(jobID, kind, id) + manifestName
	data, err := a.bucket.ReadAll(ctx, key)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := new(Manifest)
	if err := json.Unmarshal(data, m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	if m.JobID != jobID || m.Kind != kind || m.ID != id {
		return nil, fmt.Errorf("manifest %s: names %s %s %d", key, m.JobID, m.Kind, m.ID)
	}
	return m, nil
}

// ErrArtifactNotFound is returned by Get for an artifact without a
// manifest.
var ErrArtifactNotFound = errors.New("artifact not found")

// Get returns the manifest of one complete artifact; an error wrapping
// ErrArtifactNotFound when it has none (absent or incomplete).
func (a *Artifacts) Get(ctx context.Context, jobID, kind string, id int64) (*Manifest, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	m, err := a.manifest(ctx, jobID, kind, id)
	if err != nil {
		return nil, fmt.Errorf("state: read %s %d of job %s in %s: %w", kind, id, jobID, a.uri, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: %s %d of job %s", ErrArtifactNotFound, kind, id, jobID)
	}
	return m, nil
}

// ManifestKey is the key of an artifact's manifest in its store.
func ManifestKey(jobID, kind string, id int64) string {
	return Prefix(jobID, kind, id) + manifestName
}

// URI is the store's URI without its query (which may hold secrets).
func (a *Artifacts) URI() string { return a.uri }

// List returns the complete artifacts of kind for the job, oldest first.
func (a *Artifacts) List(ctx context.Context, jobID, kind string) ([]*Manifest, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	ids, err := a.artifactIDs(ctx, jobID, kind)
	if err != nil {
		return nil, fmt.Errorf("state: list %ss of job %s in %s: %w", kind, jobID, a.uri, err)
	}
	var out []*Manifest
	for _, id := range ids {
		m, err := a.manifest(ctx, jobID, kind, id)
		if err != nil {
			return nil, fmt.Errorf("state: list %ss of job %s in %s: %w", kind, jobID, a.uri, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// Delete removes an artifact: its manifest first, then its files, so that
// an interrupted delete leaves an incomplete artifact, never a manifest
// naming missing files.
func (a *Artifacts) Delete(ctx context.Context, jobID, kind string, id int64) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	prefix := Prefix(jobID, kind, id)
	err := a.bucket.Delete(ctx, prefix+manifestName)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("state: delete %s in %s: %w", prefix, a.uri, err)
	}
	if err := a.deleteAll(ctx, prefix); err != nil {
		return fmt.Errorf("state: delete %s in %s: %w", prefix, a.uri, err)
	}
	return nil
}

func (a *Artifacts) deleteAll(ctx context.Context, prefix string) error {
	keys, err := a.keys(ctx, prefix)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(transfers)
	for _, key := range keys {
		g.Go(func() error {
			if err := a.bucket.Delete(gctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return err
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return a.removeDirs(prefix)
}

// removeDirs removes the directories a file:// store is left with under
// prefix once its objects are deleted: fileblob deletes files only, and
// every checkpoint would otherwise leave a tree of empty directories. A
// directory that is not empty (an object written meanwhile) stays.
func (a *Artifacts) removeDirs(prefix string) error {
	if a.root == "" {
		return nil
	}
	top := filepath.Join(a.root, filepath.FromSlash(strings.TrimSuffix(prefix, "/")))
	var dirs []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotEmpty(dirs[i]) {
			return err
		}
	}
	return nil
}

// isNotEmpty reports whether dir still holds entries.
func isNotEmpty(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == nil
}

// HighestID is the highest artifact id of the job with any file in the
// store, complete or not (0 when there is none). A new run numbers its
// checkpoints above it, so that it never writes into the prefix of a
// checkpoint whose manifest a dead process may still be writing: two
// checkpoints' files never mix, and a manifest that lands late is older
// than anything the new run commits.
func (a *Artifacts) HighestID(ctx context.Context, jobID string) (int64, error) {
	var high int64
	for _, kind := range []string{KindCheckpoint, KindSavepoint} {
		ids, err := a.artifactIDs(ctx, jobID, kind)
		if err != nil {
			return 0, fmt.Errorf("state: list artifacts of job %s in %s: %w", jobID, a.uri, err)
		}
		for _, id := range ids {
			high = max(high, id)
		}
	}
	return high, nil
}

// CleanIncomplete removes the files of artifacts of the job that have no
// manifest and are older than the newest complete checkpoint: checkpoints
// and savepoints share one id sequence, so an incomplete artifact of
// either kind below that id was abandoned. Complete artifacts, and
// incomplete ones at or above that id (possibly still being written), are
// left alone.
func (a *Artifacts) CleanIncomplete(ctx context.Context, jobID string) error {
	complete := map[string]map[int64]bool{}
	all := map[string][]int64{}
	newest := int64(-1)
	for _, kind := range []string{KindCheckpoint, KindSavepoint} {
		ids, err := a.artifactIDs(ctx, jobID, kind)
		if err != nil {
			return fmt.Errorf("state: clean incomplete artifacts of job %s in %s: %w", jobID, a.uri, err)
		}
		all[kind] = ids
		complete[kind] = map[int64]bool{}
		for _, id := range ids {
			m, err := a.manifest(ctx, jobID, kind, id)
			if err != nil {
				return fmt.Errorf("state: clean incomplete artifacts of job %s in %s: %w", jobID, a.uri, err)
			}
			if m == nil {
				continue
			}
			complete[kind][id] = true
			if kind == KindCheckpoint {
				newest = max(newest, id)
			}
		}
	}
	for _, kind := range []string{KindCheckpoint, KindSavepoint} {
		for _, id := range all[kind] {
			if complete[kind][id] || id >= newest {
				continue
			}
			if err := a.deleteAll(ctx, Prefix(jobID, kind, id)); err != nil {
				return fmt.Errorf("state: clean incomplete %s %d of job %s in %s: %w", kind, id, jobID, a.uri, err)
			}
		}
	}
	return nil
}

// Close releases the store.
func (a *Artifacts) Close() error { return errors.Join(a.bucket.Close(), a.release()) }

func withSlash(prefix string) string {
	if prefix == "" || strings.HasSuffix(prefix, "/") {
		return prefix
	}
	return prefix + "/"
}
