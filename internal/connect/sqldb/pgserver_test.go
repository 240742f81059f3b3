package sqldb

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgPassword is the password of the test servers' user: tests check it
// never shows in errors.
const pgPassword = "s3cr3t-pw-4711"

// pgServer is a PostgreSQL server the test runs from the Debian binaries
// in a temporary directory, on 127.0.0.1 and a free port.
type pgServer struct {
	bin  string // directory of initdb and postgres
	dir  string
	port int
	cred *syscall.Credential // postgres refuses to run as root
	cmd  *exec.Cmd
	done chan error
}

// newPostgres initializes a database cluster without starting it; the
// test is skipped when PostgreSQL is not installed.
func newPostgres(t *testing.T) *pgServer {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		t.Skip("PostgreSQL is not installed (Debian package postgresql; .ci/run installs it)")
	}
	slices.Sort(bins)
	s := &pgServer{bin: filepath.Dir(bins[len(bins)-1]), port: freePort(t)}
	// Not t.TempDir: its parents are private to root, and the server may
	// run as the postgres user.
	dir, err := os.MkdirTemp("", "flowplane-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() {
		s.stop(t)
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root and there is no postgres user to run PostgreSQL as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(pgPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s.cred != nil {
		_ = os.Chown(pw, int(s.cred.Uid), int(s.cred.Gid))
	}
	out, err := s.command("initdb", "-D", filepath.Join(dir, "data"), "-U", "flowplane", "--pwfile="+pw,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	return s
}

// startPostgres initializes and starts a server.
func startPostgres(t *testing.T) *pgServer {
	t.Helper()
	s := newPostgres(t)
	s.start(t)
	return s
}

func (s *pgServer) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// start runs the server and waits until it accepts connections.
func (s *pgServer) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = s.command("postgres", "-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "shared_buffers=16MB", "-c", "max_connections=30")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	done := make(chan error, 1)
	cmd := s.cmd
	go func() { done <- cmd.Wait() }()
	s.done = done
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.uri())
		cancel()
		if err == nil {
			_ = c.Close(context.Background())
			return
		}
		select {
		case werr := <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			s.cmd = nil
			t.Fatalf("postgres exited: %v\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			t.Fatalf("postgres not ready after 30s: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop shuts the server down (fast shutdown: open sessions are ended,
// committed data is kept) and waits for it to exit.
func (s *pgServer) stop(t *testing.T) {
	t.Helper()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// uri is the connection URI of the server's postgres database.
func (s *pgServer) uri() string {
	return fmt.Sprintf("postgres://flowplane:%s@127.0.0.1:%d/postgres?sslmode=disable", pgPassword, s.port)
}

// exec runs statements on the server.
func (s *pgServer) exec(t *testing.T, stmts ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.uri())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// count runs a query returning one integer.
func (s *pgServer) count(t *testing.T, q string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.uri())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int64
	if err := c.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
