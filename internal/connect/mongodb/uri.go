package mongodb

import (
	"errors"
	"net/url"
	"strings"
)

// errBadURI never quotes the URI: it may hold a password.
var errBadURI = errors.New("uri: not a MongoDB connection string of the form " +
	"mongodb://[user:password@]host[:port][,host...][/database][?options] (or mongodb+srv://); " +
	"the value is not shown because it may hold a password")

// redactURI checks the shape of a MongoDB URI and returns the part that
// may be logged: the scheme and the host list, without credentials,
// database or options (options may hold secrets too, such as
// tlsCertificateKeyFilePassword). It is deliberately stricter than the
// driver where the driver's reading would be ambiguous: the user info must
// end at the first '@' and hold no '/' or '?', so that no part of a
// password can be taken for a host.
func redactURI(uri string) (string, error) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || (scheme != "mongodb" && scheme != "mongodb+srv") {
		return "", errBadURI
	}
	if info, after, ok := strings.Cut(rest, "@"); ok {
		if strings.ContainsAny(info, "/?") || strings.Count(info, ":") > 1 {
			return "", errBadURI
		}
		rest = after
	}
	hosts := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hosts = rest[:i]
	}
	if hosts == "" || strings.Trim(hosts, ",") == "" {
		return "", errBadURI
	}
	for _, c := range hosts {
		if !hostChar(c) {
			return "", errBadURI
		}
	}
	return scheme + "://" + hosts, nil
}

// hostChar reports whether c may appear in a MongoDB host list: names,
// IPv4 and bracketed IPv6 addresses, ports, commas, and %-escapes (of Unix
// socket paths).
func hostChar(c rune) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.ContainsRune(".-_:[],%", c)
}

// secrets lists the strings of uri that must never reach a log or an
// error: the password (as written and unescaped) and the values of
// options that carry secrets.
func secrets(uri string) []string {
	var out []string
	add := func(s string) {
		if s != "" {
			out = append(out, s)
		}
	}
	_, rest, _ := strings.Cut(uri, "://")
	if info, _, ok := strings.Cut(rest, "@"); ok {
		if _, pw, ok := strings.Cut(info, ":"); ok {
			add(pw)
			if u, err := url.PathUnescape(pw); err == nil && u != pw {
				add(u)
			}
		}
	}
	if _, q, ok := strings.Cut(rest, "?"); ok {
		for kv := range strings.SplitSeq(q, "&") {
			k, v, _ := strings.Cut(kv, "=")
			lk := strings.ToLower(k)
			if strings.Contains(lk, "password") || strings.Contains(lk, "token") ||
				strings.Contains(lk, "secret") || lk == "authmechanismproperties" {
				add(v)
				if u, err := url.QueryUnescape(v); err == nil && u != v {
					add(u)
				}
			}
		}
	}
	return out
}

// scrubber removes secrets from error text. The driver's errors name
// servers, not credentials, but a message that quotes a URI option or a
// server's reply must not carry a password to a log.
type scrubber struct{ secrets []string }

// scrubbedError keeps the driver's error for errors.Is and errors.As while
// its text has the secrets replaced.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// wrap returns err with every secret in its text replaced by "xxxxx".
func (s scrubber) wrap(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, sec := range s.secrets {
		msg = strings.ReplaceAll(msg, sec, "xxxxx")
	}
	return &scrubbedError{msg: msg, err: err}
}
