package redis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// server is a redis-server child process on a fixed loopback port with its
// data (append-only file, fsync on every write) in a temporary directory,
// so it can be killed and started again with its data.
type server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// newServer returns a server on a free port, not yet started; it skips the
// test when redis-server is not installed.
func newServer(t testing.TB) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
			t.Skip("redis-server is not installed (apt-get install redis-server); CI installs it")
		}
		bin = "/usr/bin/redis-server"
	}
	s := &server{t: t, bin: bin, port: freePort(t), dir: t.TempDir()}
	t.Cleanup(s.stop)
	return s
}

// startServer starts a new server.
func startServer(t testing.TB) *server {
	s := newServer(t)
	s.start()
	return s
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *server) url() string  { return fmt.Sprintf("redis://127.0.0.1:%d", s.port) }
func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs redis-server and waits until it answers PING.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always",
		"--logfile", filepath.Join(s.dir, "redis.log"), "--daemonize", "no")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	s.done = done
	go func(c *exec.Cmd) { _ = c.Wait(); close(done) }(s.cmd)
	c := goredis.NewClient(&goredis.Options{Addr: s.addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server did not answer on %s: %v\n%s", s.addr(), err, log)
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server exited: %s", log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill stops the server with SIGKILL: no shutdown, only what was fsynced
// survives.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

func (s *server) stop() { s.kill() }

// client is a plain client for the test's own reads and writes.
func (s *server) client(t testing.TB) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.addr(), DialTimeout: time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}
