package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Password is the password of the servers' user flowplane: tests check it
// never shows in errors or logs.
const Password = "s3cr3t-pw-4711"

// errNotInstalled: the test is skipped, not failed.
var errNotInstalled = errors.New("PostgreSQL is not installed (Debian package postgresql; .ci/run installs it)")

// Server is a PostgreSQL server run from the Debian binaries in a
// temporary directory, on 127.0.0.1 and a free port.
type Server struct {
	bin  string // directory of initdb and postgres
	dir  string
	port int
	cred *syscall.Credential // postgres refuses to run as root
	cmd  *exec.Cmd
	done chan error
	// version is server_version_num, known once started.
	version int
	// durable: the server fsyncs (Launch, for benchmarks and pgdev); test
	// servers run without, for speed.
	durable bool

	mu    sync.Mutex           // guards ahead and quit
	ahead map[string]chan made // NewDatabase's next database, by template
	quit  chan struct{}        // closed by stop: makeAhead returns
}

// New initializes a database cluster without starting it; it is removed
// when the test ends. The test is skipped when PostgreSQL is not
// installed.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := initServer()
	if s != nil {
		t.Cleanup(func() {
			s.stop()
			_ = os.RemoveAll(s.dir)
		})
	}
	if errors.Is(err, errNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Start initializes and starts a server of the test's own.
func Start(t testing.TB) *Server {
	t.Helper()
	s := New(t)
	s.Start(t)
	return s
}

// Launch initializes and starts a server outside a test (a benchmark, the
// pgdev command), durable as PostgreSQL's defaults are (fsync,
// synchronous_commit on); Close stops it and removes its directory. It
// dies with the calling process on Linux.
func Launch() (*Server, error) {
	s, err := initServer()
	if err == nil {
		s.durable = true
		err = s.start()
	}
	if err != nil {
		if s != nil {
			s.Close()
		}
		return nil, err
	}
	return s, nil
}

// Close stops a server of Launch and removes its directory.
func (s *Server) Close() {
	s.stop()
	_ = os.RemoveAll(s.dir)
}

// ExecErr is Exec outside a test: it returns the error.
func (s *Server) ExecErr(stmts ...string) error { return s.exec(stmts...) }

func initServer() (*Server, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(bins) == 0 {
		return nil, errNotInstalled
	}
	slices.Sort(bins)
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run PostgreSQL as", errNotInstalled)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: its parents are private to root, and the server may
	// run as the postgres user.
	dir, err := os.MkdirTemp("", "flowplane-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: filepath.Dir(bins[len(bins)-1]), dir: dir, port: port, cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return s, err
		}
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(Password+"\n"), 0o600); err != nil {
		return s, err
	}
	if cred != nil {
		_ = os.Chown(pw, int(cred.Uid), int(cred.Gid))
	}
	out, err := s.command("initdb", "-D", filepath.Join(dir, "data"), "-U", "flowplane", "--pwfile="+pw,
		"--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput()
	if err != nil {
		return s, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return s, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	endWithParent(cmd.SysProcAttr)
	return cmd
}

// Start runs the server and waits until it accepts connections.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) start() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + s.dir, "-c", "max_connections=100"}
	if s.durable {
		args = append(args, "-c", "shared_buffers=128MB")
	} else {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "shared_buffers=16MB")
	}
	s.cmd = s.command("postgres", args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan error, 1)
	cmd := s.cmd
	go func() { done <- cmd.Wait() }()
	s.done = done
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.URI())
		if err == nil {
			err = c.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&s.version)
			_ = c.Close(context.Background())
			cancel()
			return err
		}
		cancel()
		select {
		case werr := <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			s.cmd = nil
			return fmt.Errorf("postgres exited: %w\n%s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("postgres not ready after 30s: %w\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down (fast shutdown: open sessions are ended,
// committed data is kept) and waits for it to exit.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.stop()
}

func (s *Server) stop() {
	s.mu.Lock()
	if s.quit != nil {
		close(s.quit)
		s.ahead, s.quit = nil, nil
	}
	s.mu.Unlock()
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

// URI is the connection URI of the server's postgres database.
func (s *Server) URI() string { return s.DatabaseURI("postgres") }

// DatabaseURI is the connection URI of the server's database name.
func (s *Server) DatabaseURI(name string) string {
	return fmt.Sprintf("postgres://flowplane:%s@127.0.0.1:%d/%s?sslmode=disable", Password, s.port, name)
}

// Exec runs statements on the server's postgres database.
func (s *Server) Exec(t testing.TB, stmts ...string) {
	t.Helper()
	if err := s.exec(stmts...); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) exec(stmts ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URI())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for _, q := range stmts {
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// Count runs a query returning one integer.
func (s *Server) Count(t testing.TB, q string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URI())
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

// shared is the server of Shared: one per test binary.
var shared struct {
	once sync.Once
	srv  *Server
	err  error
	n    int // databases made, for their names
	mu   sync.Mutex
}

// Shared returns the test binary's shared server, starting it on the first
// call; Main stops it. Tests keep apart by each using a database of its
// own (NewDatabase). The test is skipped when PostgreSQL is not
// installed.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		shared.srv, shared.err = initServer()
		if shared.err == nil {
			shared.err = shared.srv.start()
		}
	})
	if errors.Is(shared.err, errNotInstalled) {
		t.Skip(shared.err)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// NewDatabase creates a database copied from template ("" for the
// server's default, template1) and returns its URI. Copying a template
// that already holds a schema is much faster than building the schema;
// and while the test runs, the server copies the next one.
func (s *Server) NewDatabase(t testing.TB, template string) string {
	t.Helper()
	s.mu.Lock()
	if s.ahead == nil {
		s.ahead, s.quit = map[string]chan made{}, make(chan struct{})
	}
	c, ok := s.ahead[template]
	if !ok {
		c = make(chan made, 1)
		s.ahead[template] = c
		go s.makeAhead(template, c, s.quit)
	}
	s.mu.Unlock()
	m := <-c
	if m.err != nil {
		t.Fatal(m.err)
	}
	return m.uri
}

// made is a database makeAhead made, or why it could not.
type made struct {
	uri string
	err error
}

// makeAhead creates databases copied from template into c, one ahead of
// their use, until quit (the server stops).
func (s *Server) makeAhead(template string, c chan<- made, quit <-chan struct{}) {
	for {
		uri, err := s.createDatabase(template)
		select {
		case c <- made{uri, err}:
		case <-quit:
			return
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) createDatabase(template string) (string, error) {
	shared.mu.Lock()
	shared.n++
	name := fmt.Sprintf("t%d", shared.n)
	shared.mu.Unlock()
	q := "CREATE DATABASE " + name
	if template != "" {
		q += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
		if s.version >= 150000 {
			// Copying the files is twice as fast as WAL-logging each page
			// for a small database on a server without fsync.
			q += " STRATEGY FILE_COPY"
		}
	}
	// The sessions of the template's last user may still be ending: the
	// copy is refused (55006) until they have.
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.exec(q)
		var pe *pgconn.PgError
		if err == nil {
			return s.DatabaseURI(name), nil
		}
		if !errors.As(err, &pe) || pe.Code != "55006" || time.Now().After(deadline) {
			return "", err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Main runs the tests of m and then stops the shared server, if one
// started; call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.stop()
		_ = os.RemoveAll(shared.srv.dir)
	}
	os.Exit(code)
}

// FreePort returns a loopback port nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
