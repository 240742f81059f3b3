package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/component/componenttest"
	"github.com/flowplane/flowplane/internal/message"
)

func batchOf(payloads ...string) message.Batch {
	var b message.Batch
	for _, p := range payloads {
		b.Messages = append(b.Messages, message.New([]byte(p)))
	}
	return b
}

// TestOutputTypes writes one batch with each redis_type and reads back
// what Redis holds.
func TestOutputTypes(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	msgs := []string{`{"id":"a","v":1}`, `{"id":"b","v":2}`, `{"id":"a","v":3}`}
	for _, tc := range []struct {
		name, conf string
		check      func(t *testing.T)
	}{
		{"rpush", "redis_type: {type: list, key: l}", func(t *testing.T) {
			if d := cmp.Diff(msgs, c.LRange(ctx, "l", 0, -1).Val()); d != "" {
				t.Error(d)
			}
		}},
		{"lpush by expr", "redis_type: {type: list, key: {type: expr, expr: '\"l:\" + this.id'}, command: lpush}", func(t *testing.T) {
			if d := cmp.Diff([]string{msgs[2], msgs[0]}, c.LRange(ctx, "l:a", 0, -1).Val()); d != "" {
				t.Error(d)
			}
		}},
		{"hashes", "redis_type: {type: hashes, key: h, field: {type: expr, expr: 'this.id'}}", func(t *testing.T) {
			if d := cmp.Diff(map[string]string{"a": msgs[2], "b": msgs[1]}, c.HGetAll(ctx, "h").Val()); d != "" {
				t.Error(d)
			}
		}},
		{"strings with ttl and value_field", "redis_type: {type: strings, key: {type: expr, expr: 'this.id'}, ttl: 1h}\nvalue_field: v", func(t *testing.T) {
			if got := c.MGet(ctx, "a", "b").Val(); fmt.Sprint(got) != "[3 2]" {
				t.Errorf("values %v", got)
			}
			if ttl := c.TTL(ctx, "a").Val(); ttl <= 0 || ttl > time.Hour {
				t.Errorf("ttl %v", ttl)
			}
		}},
		{"streams with max_len", "redis_type: {type: streams, key: x, field: body, max_len: 1000}", func(t *testing.T) {
			xs := c.XRange(ctx, "x", "-", "+").Val()
			if len(xs) != 3 || xs[1].Values["body"] != msgs[1] {
				t.Errorf("entries %v", xs)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.FlushAll(ctx)
			out, err := NewOutput(conf(t, "mode: {type: single, url: '"+s.url()+"'}\n"+tc.conf), component.Resources{})
			if err != nil {
				t.Fatal(err)
			}
			if err := out.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			defer out.Close(ctx)
			if err := out.Write(ctx, batchOf(msgs...)); err != nil {
				t.Fatal(err)
			}
			tc.check(t)
		})
	}
}

// TestOutputPublish publishes a batch and receives it on a subscription.
func TestOutputPublish(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	sub := c.Subscribe(ctx, "news")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	out, _ := NewOutput(conf(t, "mode: {type: single, url: '"+s.url()+"'}\nredis_type: {type: publish, channel: {type: value, value: news}}"), component.Resources{})
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer out.Close(ctx)
	if err := out.Write(ctx, batchOf("1", "2")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1", "2"} {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := sub.ReceiveMessage(rctx)
		cancel()
		if err != nil || m.Payload != want {
			t.Fatalf("received %v, %v; want %s", m, err, want)
		}
	}
}

// TestOutputErrors: a command Redis rejects fails the whole batch, as does
// a key expression without a value; a server that is down fails Write.
func TestOutputErrors(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	c.Set(ctx, "str", "x", 0)
	out, _ := NewOutput(conf(t, "mode: {type: single, url: '"+s.url()+"'}\nredis_type: {type: list, key: {type: expr, expr: 'this.k'}}"), component.Resources{})
	if err := out.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer out.Close(ctx)
	if err := out.Write(ctx, batchOf(`{"k":"ok"}`, `{"k":"str"}`)); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("write onto a string key: %v, want WRONGTYPE", err)
	}
	if err := out.Write(ctx, batchOf(`{"k":"ok"}`, `{"x":1}`)); err == nil || !strings.Contains(err.Error(), "message 1") {
		t.Errorf("message without a key: %v", err)
	}
	s.kill()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := out.Write(wctx, batchOf(`{"k":"ok"}`)); err == nil {
		t.Error("write with the server down succeeded")
	}
}

// TestTemporaryGet looks up strings (MGET, repeated and absent keys) and
// lists (LRANGE) in a real server.
func TestTemporaryGet(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	c.Set(ctx, "u1", `{"name":"ann"}`, 0)
	c.Set(ctx, "u2", `{"name":"bob"}`, 0)
	c.RPush(ctx, "l1", `{"i":1}`, `{"i":2}`)
	for _, tc := range []struct {
		typ  string
		keys []string
		want [][][]byte
	}{
		{"string", []string{"u2", "nope", "u1", "u2"}, [][][]byte{
			{[]byte(`{"name":"bob"}`)}, nil, {[]byte(`{"name":"ann"}`)}, {[]byte(`{"name":"bob"}`)},
		}},
		{"list", []string{"l1", "nope", "l1"}, [][][]byte{
			{[]byte(`{"i":1}`), []byte(`{"i":2}`)}, nil, {[]byte(`{"i":1}`), []byte(`{"i":2}`)},
		}},
		{"string", nil, [][][]byte{}},
	} {
		tmp, err := NewTemporary(conf(t, "mode: {type: single, url: '"+s.url()+"'}\nredis_type: {type: "+tc.typ+"}\ncodec: {type: json}"), component.Resources{})
		if err != nil {
			t.Fatal(err)
		}
		if err := tmp.Connect(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := tmp.Get(ctx, tc.keys)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s %v: (-want +got)\n%s", tc.typ, tc.keys, d)
		}
		tmp.Close(ctx)
	}
	c.Set(ctx, "s", "x", 0)
	tmp, _ := NewTemporary(conf(t, "mode: {type: single, url: '"+s.url()+"'}\nredis_type: {type: list}\ncodec: {type: json}"), component.Resources{})
	if err := tmp.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer tmp.Close(ctx)
	if _, err := tmp.Get(ctx, []string{"l1", "s"}); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("LRANGE of a string: %v", err)
	}
}

// TestStreamEnrich uses the temporary from a stream: messages are
// enriched with the profile stored under their user and written out.
func TestStreamEnrich(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	c.Set(ctx, "user:7", `{"name":"ann"}`, 0)
	c.RPush(ctx, "in", `{"user":"7"}`, `{"user":"8"}`)
	componenttest.Engine(t, streamDoc(
		"type: redis\n"+single(s.url())+"redis_type: {type: list, list: [in]}",
		"type: redis\n"+single(s.url())+"redis_type: {type: list, key: out}",
		`    temporary:
      - name: users
        type: redis
        `+single(s.url())+`        redis_type: {type: string}
        codec: {type: json}
    pipeline:
      processors:
        - type: enrich
          temporary: users
          key: {type: expr, expr: '"user:" + this.user'}
          target: profile
          missing: "null"
`))
	waitAll(t, c, "out", 2, 20*time.Second)
	got := c.LRange(ctx, "out", 0, -1).Val()
	want := []string{`{"profile":{"name":"ann"},"user":"7"}`, `{"profile":null,"user":"8"}`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
