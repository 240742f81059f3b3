package config

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ParseWALDuration reads a duration of the object-store WAL backend the
// way ArkFlow does: "500ms", "2s", "1m", or a bare number of milliseconds.
func ParseWALDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseUint(s, 10, 63); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errBadDuration
	}
	return d, nil
}

var errBadDuration = errors.New("not a duration such as 500ms, 2s or 1m")

// validate checks the object-store WAL backend of a stream whose
// durability is at p.
func (d *Durability) validate(p string) []Problem {
	b := d.Backend
	if b == nil {
		return nil
	}
	var ps []Problem
	bp := p + ".backend"
	if d.Sync == "per_entry" {
		ps = append(ps, at(p+".sync", "per_entry is not possible with backend %s: entries are stored by group commit (one PUT per group)", b.Type))
	}
	if d.Path != "" {
		ps = append(ps, at(p+".path", "path is the local WAL's directory; a WAL with a backend keeps nothing there"))
	}
	if strings.TrimSpace(b.NodeID) == "" {
		ps = append(ps, at(bp+".node_id", "required: a stable id of this node"))
	} else if strings.Contains(b.NodeID, "/") {
		ps = append(ps, at(bp+".node_id", "%q contains a slash", b.NodeID))
	}
	if strings.TrimSpace(b.StreamID) == "" {
		ps = append(ps, at(bp+".stream_id", "required: a stable id of the stream"))
	} else if strings.Contains(b.StreamID, "/") {
		ps = append(ps, at(bp+".stream_id", "%q contains a slash", b.StreamID))
	}
	switch {
	case b.URL == "" && b.S3 == nil:
		ps = append(ps, at(bp+".s3", "required (or url)"))
	case b.URL != "" && b.S3 != nil:
		ps = append(ps, at(bp+".url", "url and s3 name the bucket twice: set one"))
	case b.URL != "":
		if u, err := url.Parse(b.URL); err != nil || (u.Scheme != "file" && u.Scheme != "s3") {
			ps = append(ps, at(bp+".url", "not a file:// or s3:// URL"))
		} else if u.Scheme == "s3" && u.Host == "" {
			ps = append(ps, at(bp+".url", "names no bucket"))
		} else if u.Scheme == "file" && (u.Path == "" || u.Path == "/") {
			ps = append(ps, at(bp+".url", "names no directory"))
		}
	default:
		ps = append(ps, b.S3.validate(bp+".s3")...)
	}
	dur := func(path, v string) {
		if v == "" {
			return
		}
		if _, err := ParseWALDuration(v); err != nil {
			ps = append(ps, at(path, "%q is %v", v, err))
		}
	}
	if s := b.Segment; s != nil {
		dur(bp+".segment.flush_interval", s.FlushInterval)
	}
	if s := b.SegmentTuning; s != nil {
		dur(bp+".segment_tuning.flush_interval", s.FlushInterval)
	}
	if c := b.Cursor; c != nil {
		dur(bp+".cursor.interval", c.Interval)
	}
	if pp := b.ParallelPut; pp != nil {
		dur(bp+".parallel_put.shutdown_timeout", pp.ShutdownTimeout)
	}
	if c := b.Compression; c != nil && c.Level != nil {
		lo, hi := 0, 0
		switch c.Type {
		case "zstd":
			lo, hi = 0, 22
		case "gzip":
			lo, hi = 1, 9
		case "lz4":
			lo, hi = 1, 16
		}
		if hi == 0 {
			ps = append(ps, at(bp+".compression.level", "compression %s takes no level", c.Type))
		} else if *c.Level < lo || *c.Level > hi {
			ps = append(ps, at(bp+".compression.level", "%d is outside %s's %d-%d", *c.Level, c.Type, lo, hi))
		}
	}
	return ps
}

func (s *WALS3) validate(p string) []Problem {
	var ps []Problem
	if strings.TrimSpace(s.Bucket) == "" {
		ps = append(ps, at(p+".bucket", "required"))
	}
	if (s.AccessKeyID == "") != (s.SecretAccessKey == "") {
		ps = append(ps, at(p+".secret_access_key", "access_key_id and secret_access_key go together: set both, or neither for the SDK's default credentials"))
	}
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			ps = append(ps, at(p+".endpoint", "not an http:// or https:// URL"))
		case u.Scheme == "http" && !s.AllowHTTP:
			ps = append(ps, at(p+".endpoint", "an http:// endpoint needs allow_http: true"))
		}
	}
	return ps
}
