package objectstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/s3blob"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
	"github.com/flowplane/flowplane/internal/state"
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
	// fs is how a file:// bucket's directory is reached, net how an
	// S3-compatible endpoint is dialled by the probe (the component's).
	fs  sandbox.FS
	net sandbox.Net
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

// open opens the bucket as state.OpenBucket does (create: a file://
// bucket creates its directory), having first dialled an S3-compatible
// endpoint, and then lists one key to learn that the bucket exists and
// answers, within connectTimeout.
//
// release, to call once the bucket is closed, lets go of what a file://
// bucket's confined directory holds open (state.OpenBucketIn).
func (b bucketURL) open(ctx context.Context, create bool) (bk *blob.Bucket, release func() error, err error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if ep := b.u.Query().Get("endpoint"); ep != "" && b.u.Scheme == s3blob.Scheme {
		if err := dialEndpoint(ctx, ep, b.net); err != nil {
			return nil, nil, fmt.Errorf("open %s: %w", b.shown, err)
		}
	}
	bk, release, err = state.OpenBucketIn(ctx, b.u, create, b.fs)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", b.shown, err)
	}
	ok, err := bk.IsAccessible(ctx)
	if err == nil && !ok {
		err = errors.New("the bucket does not exist")
	}
	if err != nil {
		_ = bk.Close()
		_ = release()
		if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("no answer within %s: %w", connectTimeout, err)
		}
		return nil, nil, fmt.Errorf("open %s: %w", b.shown, err)
	}
	return bk, release, nil
}

// dialEndpoint opens and closes a TCP connection to an S3-compatible
// endpoint, so that a server that is down is reported at once and plainly
// (connection refused) rather than after the SDK's retries as a deadline.
func dialEndpoint(ctx context.Context, endpoint string, n sandbox.Net) error {
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
	c, err := n.Dial(nil)(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", host, err)
	}
	return c.Close()
}
