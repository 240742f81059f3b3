package objectstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"

	"github.com/flowplane/flowplane/internal/component"
)

// connectTimeout bounds opening and probing a bucket, so that Connect
// reports an unreachable server within seconds instead of waiting on the
// SDK's dial timeouts and retries.
const connectTimeout = 5 * time.Second

// urlProp is the schema of a bucket URL field; the constructors check the
// rest.
func urlProp() map[string]any {
	p := component.Prop("string", "Bucket URL: file:///dir or s3://bucket[/prefix][?region=...&endpoint=...&use_path_style=true].", nil)
	p["pattern"] = "^(file|s3)://"
	return p
}

// bucketURL is a parsed bucket URL. It is checked in constructors, without
// any network, and opened by Connect.
type bucketURL struct {
	u *url.URL
	// shown is the URL without query and user info, safe for logs and
	// errors (the query may carry credentials of some providers).
	shown string
}

// parseBucketURL checks field's value: a file:// or s3:// URL.
func parseBucketURL(field, raw string) (bucketURL, error) {
	if raw == "" {
		return bucketURL{}, fmt.Errorf("%s: required", field)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bucketURL{}, fmt.Errorf("%s: not a URL", field) // the text may hold secrets
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
	switch u.Scheme {
	case fileblob.Scheme:
		if u.Path == "" || u.Path == "/" {
			return bucketURL{}, fmt.Errorf("%s: %s names no directory", field, shown)
		}
	case s3blob.Scheme:
		if u.Host == "" {
			return bucketURL{}, fmt.Errorf("%s: %s names no bucket", field, shown)
		}
	default:
		return bucketURL{}, fmt.Errorf("%s: scheme %q is not file or s3", field, u.Scheme)
	}
	return bucketURL{u: u, shown: shown}, nil
}

// open opens the bucket the way the state package opens checkpoint
// stores: a file:// bucket writes no metadata sidecar files and writes
// temporary files next to their objects (so the final rename stays on one
// file system), and creates its directory when create is set; the path of
// an s3:// URL is a key prefix in the bucket, whose query takes
// gocloud.dev's s3blob parameters (region, endpoint, use_path_style, ...);
// with an endpoint, responses are checked for checksums only when the
// request asked for them (response_checksum_validation=when_required)
// unless the URL says otherwise.
// Credentials come from the standard AWS environment.
//
// It then lists one key to learn that the bucket exists and answers,
// within connectTimeout.
func (b bucketURL) open(ctx context.Context, create bool) (*blob.Bucket, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	u := *b.u
	var (
		bk  *blob.Bucket
		err error
	)
	switch u.Scheme {
	case fileblob.Scheme:
		q := u.Query()
		if create && !q.Has("create_dir") {
			q.Set("create_dir", "true")
		}
		if !q.Has("metadata") {
			q.Set("metadata", "skip")
		}
		if !q.Has("no_tmp_dir") {
			q.Set("no_tmp_dir", "true")
		}
		u.RawQuery = q.Encode()
		bk, err = blob.OpenBucket(ctx, u.String())
	case s3blob.Scheme:
		prefix := strings.Trim(u.Path, "/")
		u.Path = ""
		q := u.Query()
		if q.Has("endpoint") && !q.Has("response_checksum_validation") {
			// S3-compatible servers often send no checksums, and the SDK
			// then prints a warning to stderr for every object read.
			q.Set("response_checksum_validation", "when_required")
			u.RawQuery = q.Encode()
		}
		if ep := q.Get("endpoint"); ep != "" {
			if err := dialEndpoint(ctx, ep); err != nil {
				return nil, fmt.Errorf("open %s: %w", b.shown, err)
			}
		}
		bk, err = blob.OpenBucket(ctx, u.String())
		if err == nil && prefix != "" {
			bk = blob.PrefixedBucket(bk, prefix+"/")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", b.shown, err)
	}
	ok, err := bk.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("the bucket does not exist")
	}
	if err != nil {
		_ = bk.Close()
		if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("no answer within %s: %w", connectTimeout, err)
		}
		return nil, fmt.Errorf("open %s: %w", b.shown, err)
	}
	return bk, nil
}

// dialEndpoint opens and closes a TCP connection to an S3-compatible
// endpoint, so that a server that is down is reported at once and plainly
// (connection refused) rather than after the SDK's retries as a deadline.
func dialEndpoint(ctx context.Context, endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("endpoint %q is not a URL such as http://127.0.0.1:9000", endpoint)
	}
	host := u.Host
	if u.Port() == "" {
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", host, err)
	}
	return c.Close()
}
