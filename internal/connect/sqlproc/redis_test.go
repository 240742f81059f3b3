package sqlproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	goredis "github.com/redis/go-redis/v9"

	"github.com/flowplane/flowplane/internal/component"
	_ "github.com/flowplane/flowplane/internal/connect/redis" // the redis temporary
)

// redisServer starts redis-server on a free loopback port and returns its
// address; it skips the test when redis-server is not installed.
func redisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server); CI installs it")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
		"--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server did not answer on %s: %v\n%s", addr, err, log)
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server exited: %s", log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestRedisTemporary joins a batch with a redis temporary table, as
// ArkFlow's redis_temporary_example does.
func TestRedisTemporary(t *testing.T) {
	addr := redisServer(t)
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	for k, v := range map[string]string{
		"device:oven": `{"name":"oven","room":"kitchen","floor":1}`,
		"device:lamp": `{"name":"lamp","room":"hall","floor":0}`,
	} {
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	temp, err := component.Default.NewTemporary("redis", map[string]any{
		"mode":       map[string]any{"type": "single", "url": "redis://" + addr},
		"redis_type": map[string]any{"type": "string"},
		"codec":      map[string]any{"type": "json"},
	}, component.Resources{})
	if err != nil {
		t.Fatal(err)
	}
	if err := temp.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer temp.Close(ctx)
	p := build(t, map[string]any{
		"query": "SELECT flow.device, flow.reading, device_info.room, device_info.floor FROM flow " +
			"LEFT JOIN device_info ON flow.device = device_info.name ORDER BY flow.reading",
		"temporary_list": []any{map[string]any{"name": "devices", "table_name": "device_info",
			"key": map[string]any{"type": "expr", "expr": "concat('device:', device)"}}},
	}, resources(map[string]component.Temporary{"devices": temp}))
	got, err := rows(t, p, jsonTable(t, readings...))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"device":"lamp","reading":1,"room":"hall","floor":0}`,
		`{"device":"fan","reading":2,"room":null,"floor":null}`,
		`{"device":"oven","reading":3,"room":"kitchen","floor":1}`,
		`{"device":"oven","reading":5,"room":"kitchen","floor":1}`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
