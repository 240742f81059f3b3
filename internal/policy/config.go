package policy

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/flowplane/flowplane/internal/config"
)

// fileKeys are the component fields that name a file or directory the
// component reads or writes, at any depth of its fields (sql's
// input_type.path, a codec's proto_inputs, tls.cert_file).
var fileKeys = map[string]bool{
	"path": true, "file_path": true, "module": true, "schema_path": true,
	"proto_inputs": true, "proto_includes": true, "root_cert": true, "client_cert": true,
	"client_key": true, "cert_file": true, "key_file": true, "ca_file": true,
	"root": true, "dir": true, "directory": true,
}

// notFileKeys are fields named like files that are not, by component
// (kind/type): the http input's URL path, an object store's object key
// template.
var notFileKeys = map[string]map[string]bool{
	"input/http":          {"path": true},
	"output/http":         {"path": true},
	"input/websocket":     {"path": true},
	"output/object_store": {"path": true},
	"input/object_store":  {"path": true},
}

// destKeys are the component fields that name where a component connects
// to. Listen addresses (an http input's address) are not destinations.
var destKeys = map[string]bool{
	"url": true, "urls": true, "brokers": true, "uri": true, "dsn": true,
	"endpoint": true, "host": true, "hosts": true, "servers": true, "bootstrap_servers": true,
	"registry_url": true,
}

// Config checks the files and destinations of a materialized
// configuration from the Hub (its ${secret:} references resolved, so that
// a path held in a secret is checked as it will be used): every stream's
// and job's components, WAL directories and stores, job state roots and
// checkpoint stores, and the log file.
func (p *Policy) Config(ctx context.Context, cfg *config.Config) []Denial {
	c := checker{p: p, ctx: ctx}
	if cfg.Logging.FilePath != "" {
		c.file("logging.file_path", cfg.Logging.FilePath)
	}
	for i, s := range cfg.Streams {
		at := "streams[" + strconv.Itoa(i) + "]"
		c.component(at+".input", "input", s.Input)
		if s.Buffer != nil {
			c.component(at+".buffer", "buffer", *s.Buffer)
		}
		for k, pr := range s.Pipeline.Processors {
			c.component(at+".pipeline.processors["+strconv.Itoa(k)+"]", "processor", pr)
		}
		c.component(at+".output", "output", s.Output)
		if s.ErrorOutput != nil {
			c.component(at+".error_output", "output", *s.ErrorOutput)
		}
		for k, t := range s.Temporary {
			c.component(at+".temporary["+strconv.Itoa(k)+"]", "temporary", t)
		}
		if d := s.Durability; d != nil {
			if d.Path != "" {
				c.file(at+".durability.path", d.Path)
			}
			if b := d.Backend; b != nil {
				if b.URL != "" {
					c.value(at+".durability.backend.url", b.URL)
				}
				if b.S3 != nil && b.S3.Endpoint != "" {
					c.dest(at+".durability.backend.s3.endpoint", b.S3.Endpoint)
				}
			}
		}
	}
	for i, j := range cfg.Jobs {
		at := "jobs[" + strconv.Itoa(i) + "]"
		for k, s := range j.Sources {
			c.fields(at+".sources["+strconv.Itoa(k)+"].config", "input/"+s.InputType, s.Config)
		}
		for k, s := range j.Sinks {
			c.fields(at+".sinks["+strconv.Itoa(k)+"].config", "output/"+s.OutputType, s.Config)
		}
		for k, o := range j.Operators {
			c.fields(at+".operators["+strconv.Itoa(k)+"].config", "operator/"+o.Kind, o.Config)
		}
		if j.State != nil && j.State.Root != "" {
			c.file(at+".state.root", j.State.Root)
		}
		if j.Checkpoint != nil && j.Checkpoint.ObjectStoreURI != "" {
			c.value(at+".checkpoint.object_store_uri", j.Checkpoint.ObjectStoreURI)
		}
	}
	return c.ds
}

// checker collects the denials of one configuration.
type checker struct {
	p   *Policy
	ctx context.Context
	ds  []Denial
}

func (c *checker) component(at, kind string, comp config.Component) {
	c.fields(at, kind+"/"+comp.Type, comp.Fields)
}

// fields walks a component's fields (keys sorted, for stable reports).
func (c *checker) fields(at, comp string, fields map[string]any) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.field(at+"."+k, comp, k, fields[k])
	}
}

func (c *checker) field(at, comp, key string, v any) {
	switch t := v.(type) {
	case string:
		switch {
		case fileKeys[key] && !notFileKeys[comp][key]:
			c.value(at, t)
			if !strings.Contains(t, "://") {
				c.file(at, t)
			}
		case destKeys[key]:
			c.dest(at, t)
		default:
			c.value(at, t)
		}
	case []any:
		for i, e := range t {
			c.field(at+"["+strconv.Itoa(i)+"]", comp, key, e)
		}
	case map[string]any:
		c.fields(at, comp, t)
	}
}

// value checks a string that may be a file:// URL, whatever its field.
func (c *checker) value(at, s string) {
	if rest, ok := strings.CutPrefix(s, "file://"); ok {
		name := rest
		if u, err := url.Parse(s); err == nil && u.Path != "" {
			name = u.Path
		}
		c.file(at, name)
	} else if strings.HasPrefix(s, "s3://") {
		c.dest(at, s)
	}
}

func (c *checker) file(at, name string) {
	if err := Within(c.p.roots, name); err != nil {
		c.ds = append(c.ds, Denial{Path: at, Message: err.Error(), Rule: RuleFileRoots})
	}
}

func (c *checker) dest(at, s string) {
	if err := c.p.Destination(c.ctx, s); err != nil {
		c.ds = append(c.ds, Denial{Path: at, Message: "destination " + err.Error(), Rule: RuleOutbound})
	}
}
