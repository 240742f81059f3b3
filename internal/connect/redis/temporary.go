package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/flowplane/flowplane/internal/component"
)

func init() {
	component.Default.RegisterTemporary(component.Spec{
		Name: "redis",
		Summary: "A lookup table in Redis: `string` keys read with MGET (pipelined GETs in cluster mode), or " +
			"`list` keys read whole with LRANGE key 0 -1. Values are read as the codec says (json).",
		Schema: component.ObjectSchema(map[string]any{
			"mode": modeSchema(),
			"redis_type": described(component.ObjectSchema(map[string]any{
				"type": component.EnumProp("`string`: one value per key; `list`: every element of the list at the key.",
					"", "string", "list"),
			}, "type"), "What the keys hold: `{type: string}` (MGET) or `{type: list}` (LRANGE key 0 -1)."),
			"codec": described(component.ObjectSchema(map[string]any{
				"type": component.EnumProp("How values are read: `json`, each value a JSON document.", "", "json"),
			}, "type"), "How stored values are read: `{type: json}`."),
		}, "mode", "redis_type", "codec"),
		Example: `type: redis
name: users
mode:
  type: single
  url: redis://127.0.0.1:6379
redis_type:
  type: string
codec:
  type: json
`,
	}, NewTemporary)
}

// TemporaryConfig is the configuration of the redis temporary.
type TemporaryConfig struct {
	Mode      ModeConfig `json:"mode"`
	RedisType struct {
		Type string `json:"type"`
	} `json:"redis_type"`
	Codec struct {
		Type string `json:"type"`
	} `json:"codec"`
}

var _ component.Temporary = (*Temporary)(nil)

// Temporary looks keys up in Redis.
type Temporary struct {
	conn   *connection
	list   bool
	client goredis.UniversalClient
}

// NewTemporary builds a redis temporary from its configuration.
func NewTemporary(conf map[string]any, res component.Resources) (component.Temporary, error) {
	var c TemporaryConfig
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	conn, err := parseMode(c.Mode, res.Net)
	errs := []error{err}
	switch c.RedisType.Type {
	case "string", "list":
	case "":
		errs = append(errs, errors.New("redis_type.type: required (string or list)"))
	default:
		errs = append(errs, fmt.Errorf("redis_type.type: must be string or list, got %q", c.RedisType.Type))
	}
	switch c.Codec.Type {
	case "json":
	case "":
		errs = append(errs, errors.New("codec.type: required (json)"))
	default:
		errs = append(errs, fmt.Errorf("codec.type: must be json, got %q", c.Codec.Type))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &Temporary{conn: conn, list: c.RedisType.Type == "list"}, nil
}

// Connect makes the client and checks that the server answers. It may be
// called again after it failed.
func (t *Temporary) Connect(ctx context.Context) error {
	if t.client != nil {
		_ = t.client.Close()
	}
	t.client = t.conn.client(false)
	if err := t.conn.ping(ctx, t.client); err != nil {
		return fmt.Errorf("redis temporary: %w", err)
	}
	return nil
}

// Get returns the values stored under each key, asking Redis once per
// distinct key.
func (t *Temporary) Get(ctx context.Context, keys []string) ([][][]byte, error) {
	out := make([][][]byte, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	index := make(map[string]int, len(keys)) // key -> position in uniq
	var uniq []string
	for _, k := range keys {
		if _, ok := index[k]; !ok {
			index[k] = len(uniq)
			uniq = append(uniq, k)
		}
	}
	vals, err := t.fetch(ctx, uniq)
	if err != nil {
		return nil, fmt.Errorf("redis temporary: %w", err)
	}
	for i, k := range keys {
		out[i] = vals[index[k]]
	}
	return out, nil
}

func (t *Temporary) fetch(ctx context.Context, keys []string) ([][][]byte, error) {
	vals := make([][][]byte, len(keys))
	if !t.list && t.conn.single != nil {
		res, err := t.client.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range res {
			if s, ok := v.(string); ok {
				vals[i] = [][]byte{[]byte(s)}
			}
		}
		return vals, nil
	}
	// Lists, and strings in a cluster, where MGET cannot span slots.
	p := t.client.Pipeline()
	lr := make([]*goredis.StringSliceCmd, len(keys))
	gets := make([]*goredis.StringCmd, len(keys))
	for i, k := range keys {
		if t.list {
			lr[i] = p.LRange(ctx, k, 0, -1)
		} else {
			gets[i] = p.Get(ctx, k)
		}
	}
	_, _ = p.Exec(ctx) // each command's error is looked at below
	for i := range keys {
		if t.list {
			if err := lr[i].Err(); err != nil {
				return nil, err
			}
			for _, s := range lr[i].Val() {
				vals[i] = append(vals[i], []byte(s))
			}
			continue
		}
		s, err := gets[i].Result()
		switch {
		case err == goredis.Nil:
		case err != nil:
			return nil, err
		default:
			vals[i] = [][]byte{[]byte(s)}
		}
	}
	return vals, nil
}

// Close disconnects.
func (t *Temporary) Close(context.Context) error {
	if t.client == nil {
		return nil
	}
	err := t.client.Close()
	t.client = nil
	return err
}

func described(s map[string]any, desc string) map[string]any {
	s["description"] = desc
	return s
}
