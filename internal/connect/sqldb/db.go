package sqldb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/sandbox"
)

// sqlitePath is the path SQLite opens name by. Through a confined FS
// (the Hub's work) the file's directory is opened through the allowed
// root and pinned (sandbox.FS.PinParent), and the file itself must
// resolve within the root now; SQLite then opens the file, and its
// journal, by name in that directory. A link put in place of the file
// itself after this check is the residual: SQLite follows it.
func sqlitePath(fsys sandbox.FS, name string) (string, func() error, error) {
	return fsys.PinParent(name)
}

// Database types of input_type.type and output_type.type.
const (
	typePostgres = "postgres"
	typeMySQL    = "mysql"
	typeSQLite   = "sqlite"
	typeDuckDB   = "duckdb"
	typeJSON     = "json" // input only: a JSON file, local or in an object store
)

// dialTimeout bounds connecting to a server, so that Connect fails fast
// when it is down and the stream retries.
const dialTimeout = 5 * time.Second

// DBConfig is input_type / output_type: which database and how to reach it,
// in ArkFlow's shape.
type DBConfig struct {
	Type        string             `json:"type"`
	URI         string             `json:"uri"`
	Path        string             `json:"path"`
	Name        string             `json:"name"`
	SSL         *SSLConfig         `json:"ssl"`
	ObjectStore *ObjectStoreConfig `json:"object_store"`
}

// SSLConfig is the ssl object of a postgres or mysql connection.
type SSLConfig struct {
	Mode       string `json:"ssl_mode"`
	RootCert   string `json:"root_cert"`
	ClientCert string `json:"client_cert"`
	ClientKey  string `json:"client_key"`
}

// dbSchema is the schema of input_type and output_type; files adds the
// json type and object_store (the input's).
func dbSchema(what string, files bool) map[string]any {
	ssl := component.ObjectSchema(map[string]any{
		"ssl_mode": component.Prop("string", "disable, prefer, require, verify_ca or verify_full "+
			"(verify_identity is verify_full; ArkFlow's spellings with _ or - are accepted).", nil),
		"root_cert":   component.Prop("string", "Path of the root CA certificate (PEM).", nil),
		"client_cert": component.Prop("string", "Path of the client certificate (PEM).", nil),
		"client_key":  component.Prop("string", "Path of the client key (PEM).", nil),
	}, "ssl_mode")
	ssl["description"] = "TLS to the server (postgres and mysql)."
	types := []string{typePostgres, typeMySQL, typeSQLite, typeDuckDB}
	typeDoc := "Database: postgres (pgx), mysql (go-sql-driver) or sqlite (modernc, no server). " +
		"duckdb is recognized for ArkFlow compatibility but not supported."
	if files {
		types = append(types, typeJSON)
		typeDoc += " json: a JSON file (objects one per line, or one array of objects), local or in an " +
			"object store, queried as the table `flow` (or `name`)."
	}
	props := map[string]any{
		"type": component.EnumProp(typeDoc, "", types...),
		"uri": component.Prop("string", "Connection URI for postgres (`postgres://user:pass@host:5432/db`, or "+
			"key=value form) and mysql (`mysql://user:pass@host:3306/db`, or a go-sql-driver DSN). The "+
			"password is never logged nor shown in errors.", nil),
		"path": component.Prop("string", "Database file for sqlite.", nil),
		"name": component.Prop("string", "Accepted for ArkFlow compatibility (its registered table name); unused.", nil),
		"ssl":  ssl,
	}
	if files {
		props["path"] = component.Prop("string", "Database file for sqlite; for json the file: a local path, "+
			"a file:// URL, or s3://bucket/key with object_store.", nil)
		props["name"] = component.Prop("string", "For json, the table name select_sql reads (default flow); "+
			"otherwise accepted for ArkFlow compatibility and unused.", nil)
		props["object_store"] = objectStoreSchema()
	}
	p := component.ObjectSchema(props, "type")
	p["description"] = what
	delete(p["properties"].(map[string]any)["type"].(map[string]any), "default")
	return p
}

// database is how to open a connection to one configured database.
type database struct {
	kind string
	// open opens mysql's and sqlite's pool and returns what to release
	// with it; nil for postgres.
	open    func() (*sql.DB, func() error, error)
	pg      *pgx.ConnConfig // postgres
	secrets []string        // passwords, scrubbed from every error
	where   string          // host:port or file, for logs
}

// parseDB validates c and prepares (without connecting) a way to open the
// database. field is "input_type" or "output_type", for error messages.
// Servers are dialled through res.Net and a SQLite file is opened
// through res.FS (the Hub's work: the node's remote policy at use).
func parseDB(field string, c DBConfig, res component.Resources) (*database, error) {
	switch c.Type {
	case typePostgres:
		return parsePostgres(field, c, res.Net)
	case typeMySQL:
		return parseMySQL(field, c, res)
	case typeSQLite:
		if c.Path == "" {
			return nil, fmt.Errorf("%s.path: required for sqlite", field)
		}
		if c.URI != "" {
			return nil, fmt.Errorf("%s.uri: not used by sqlite; set path", field)
		}
		if strings.ContainsAny(c.Path, "?#") {
			return nil, fmt.Errorf("%s.path: must not contain ? or #", field)
		}
		return &database{kind: typeSQLite, where: c.Path, open: func() (*sql.DB, func() error, error) {
			path, release, err := sqlitePath(res.FS, c.Path)
			if err != nil {
				return nil, nil, err
			}
			db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
			if err != nil {
				release()
				return nil, nil, err
			}
			// One connection: SQLite has one writer, and a second
			// connection would only wait on the first's locks.
			db.SetMaxOpenConns(1)
			return db, release, nil
		}}, nil
	case typeDuckDB:
		return nil, fmt.Errorf("%s.type: duckdb is not supported by flowplane (it has no pure-Go driver); "+
			"use sqlite, postgres or mysql", field)
	case "":
		return nil, fmt.Errorf("%s.type: required (postgres, mysql or sqlite)", field)
	default:
		return nil, fmt.Errorf("%s.type: %q is not postgres, mysql or sqlite", field, c.Type)
	}
}

func parsePostgres(field string, c DBConfig, n sandbox.Net) (*database, error) {
	if c.URI == "" {
		return nil, fmt.Errorf("%s.uri: required for postgres", field)
	}
	if c.Path != "" {
		return nil, fmt.Errorf("%s.path: only for sqlite; set uri", field)
	}
	uri := c.URI
	if c.SSL != nil {
		mode, err := pgSSLMode(c.SSL.Mode)
		if err != nil {
			return nil, fmt.Errorf("%s.ssl.ssl_mode: %w", field, err)
		}
		params := [][2]string{{"sslmode", mode}}
		for _, kv := range [][2]string{{"sslrootcert", c.SSL.RootCert}, {"sslcert", c.SSL.ClientCert}, {"sslkey", c.SSL.ClientKey}} {
			if kv[1] != "" {
				params = append(params, kv)
			}
		}
		uri = withPGParams(uri, params)
	}
	cfg, err := pgx.ParseConfig(uri)
	if err != nil {
		// pgx's own message may quote the URI: say only what is wrong.
		return nil, fmt.Errorf("%s.uri: not a valid postgres connection string", field)
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > dialTimeout {
		cfg.ConnectTimeout = dialTimeout
	}
	if n.Restricted() {
		// The dialler resolves host names itself, so that it decides each
		// address knowing the name it was asked for.
		cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
		cfg.DialFunc = pgconn.DialFunc(n.Dial(&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 5 * time.Minute}))
	}
	d := &database{kind: typePostgres, where: net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))}
	if cfg.Password != "" {
		d.secrets = append(d.secrets, cfg.Password)
	}
	d.pg = cfg
	return d, nil
}

// withPGParams adds connection parameters to a postgres URI in URL or
// key=value form.
func withPGParams(uri string, params [][2]string) string {
	if strings.HasPrefix(uri, "postgres://") || strings.HasPrefix(uri, "postgresql://") {
		u, err := url.Parse(uri)
		if err != nil {
			return uri // ParseConfig reports it
		}
		q := u.Query()
		for _, kv := range params {
			q.Set(kv[0], kv[1])
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	var b strings.Builder
	b.WriteString(uri)
	for _, kv := range params {
		v := strings.ReplaceAll(strings.ReplaceAll(kv[1], `\`, `\\`), `'`, `\'`)
		fmt.Fprintf(&b, " %s='%s'", kv[0], v)
	}
	return b.String()
}

// normalizeSSLMode folds ArkFlow's and libpq's spellings into libpq's.
func normalizeSSLMode(m string) string {
	m = strings.ReplaceAll(strings.ToLower(m), "_", "-")
	switch m {
	case "disabled", "false":
		return "disable"
	case "preferred":
		return "prefer"
	case "required", "true":
		return "require"
	case "verify-identity":
		return "verify-full"
	}
	return m
}

func pgSSLMode(m string) (string, error) {
	switch n := normalizeSSLMode(m); n {
	case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
		return n, nil
	}
	return "", fmt.Errorf("%q is not disable, prefer, require, verify_ca or verify_full", m)
}

// mysqlTLSNames numbers the TLS configurations registered with the mysql
// driver (its registry is global).
var mysqlTLSNames atomic.Int64

func parseMySQL(field string, c DBConfig, res component.Resources) (*database, error) {
	n := res.Net
	if c.URI == "" {
		return nil, fmt.Errorf("%s.uri: required for mysql", field)
	}
	if c.Path != "" {
		return nil, fmt.Errorf("%s.path: only for sqlite; set uri", field)
	}
	cfg, err := mysqlConfig(c.URI)
	if err != nil {
		return nil, fmt.Errorf("%s.uri: %w", field, err)
	}
	if cfg.Timeout == 0 || cfg.Timeout > dialTimeout {
		cfg.Timeout = dialTimeout
	}
	cfg.ParseTime = true
	if c.SSL != nil {
		if err := mysqlTLS(cfg, c.SSL, res.FS); err != nil {
			return nil, fmt.Errorf("%s.ssl: %w", field, err)
		}
	}
	d := &database{kind: typeMySQL, where: cfg.Addr}
	if cfg.Passwd != "" {
		d.secrets = append(d.secrets, cfg.Passwd)
	}
	if n.Restricted() {
		cfg.DialFunc = n.Dial(&net.Dialer{Timeout: cfg.Timeout})
	}
	d.open = func() (*sql.DB, func() error, error) {
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, nil, err
		}
		return sql.OpenDB(conn), func() error { return nil }, nil
	}
	return d, nil
}

// mysqlConfig reads a mysql:// URI (ArkFlow's form) or a go-sql-driver
// DSN. Errors never quote the input: it may hold a password.
func mysqlConfig(uri string) (*mysql.Config, error) {
	if !strings.HasPrefix(uri, "mysql://") {
		cfg, err := mysql.ParseDSN(uri)
		if err != nil {
			return nil, errors.New("not a valid mysql:// URI or DSN")
		}
		return cfg, nil
	}
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return nil, errors.New("not a valid mysql:// URI (mysql://user:pass@host:3306/db)")
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	// The part without credentials goes through the driver's own parser, so
	// that its query parameters mean what they mean in a DSN.
	dsn := "tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/")
	if u.RawQuery != "" {
		dsn += "?" + u.RawQuery
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("not a valid mysql:// URI: bad host, database or parameters")
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg, nil
}

// The certificate files are read through fsys.
func mysqlTLS(cfg *mysql.Config, s *SSLConfig, fsys sandbox.FS) error {
	mode := normalizeSSLMode(s.Mode)
	switch mode {
	case "disable":
		cfg.TLSConfig = "false"
		return nil
	case "prefer":
		cfg.TLSConfig = "preferred"
		return nil
	case "require", "verify-ca", "verify-full":
	default:
		return fmt.Errorf("ssl_mode: %q is not disable, prefer, require, verify_ca or verify_full", s.Mode)
	}
	tc := &tls.Config{ServerName: strings.Split(cfg.Addr, ":")[0], MinVersion: tls.VersionTLS12}
	if mode == "require" {
		tc.InsecureSkipVerify = true // require: encrypted, not verified (libpq's meaning)
	}
	if s.RootCert != "" {
		pem, err := fsys.ReadFile(s.RootCert)
		if err != nil {
			return fmt.Errorf("root_cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return errors.New("root_cert: no PEM certificate found")
		}
		tc.RootCAs = pool
	}
	if (s.ClientCert == "") != (s.ClientKey == "") {
		return errors.New("client_cert and client_key go together")
	}
	if s.ClientCert != "" {
		certPEM, err := fsys.ReadFile(s.ClientCert)
		if err != nil {
			return fmt.Errorf("client_cert: %w", err)
		}
		keyPEM, err := fsys.ReadFile(s.ClientKey)
		if err != nil {
			return fmt.Errorf("client_key: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("client_cert: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	name := fmt.Sprintf("flowplane-%d", mysqlTLSNames.Add(1))
	if err := mysql.RegisterTLSConfig(name, tc); err != nil {
		return err
	}
	cfg.TLSConfig = name
	return nil
}

// connect opens a connection (a pool for mysql and sqlite) and checks the
// server answers, within dialTimeout. On failure nothing stays open.
func (d *database) connect(ctx context.Context) (conn, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout+time.Second)
	defer cancel()
	if d.pg != nil {
		c := &pgConn{cfg: d.pg}
		if _, err := c.get(ctx); err != nil {
			return nil, fmt.Errorf("connect to %s %s: %w", d.kind, d.where, d.scrub(err))
		}
		return c, nil
	}
	db, release, err := d.open()
	if err != nil {
		return nil, d.scrub(err)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		_ = release()
		return nil, fmt.Errorf("connect to %s %s: %w", d.kind, d.where, d.scrub(err))
	}
	return sqlConn{db: db, release: release}, nil
}

// scrub hides the passwords of d in err's message.
func (d *database) scrub(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	redacted := msg
	for _, s := range d.secrets {
		redacted = strings.ReplaceAll(redacted, s, "xxxxx")
	}
	if redacted == msg {
		return err
	}
	return &redactedError{msg: redacted, err: err}
}

// redactedError is an error whose message had secrets removed; errors.Is
// and errors.As still see the cause.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// dialect knows how one database spells identifiers and parameters.
type dialect struct {
	kind string
}

// quote quotes one identifier (a column).
func (d dialect) quote(name string) string {
	q, esc := `"`, `""`
	if d.kind == typeMySQL {
		q, esc = "`", "``"
	}
	return q + strings.ReplaceAll(name, q, esc) + q
}

// table quotes a table name; a dotted name (schema.table) is quoted part
// by part.
func (d dialect) table(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = d.quote(p)
	}
	return strings.Join(parts, ".")
}

// param is the n-th (1-based) bind parameter.
func (d dialect) param(n int) string {
	if d.kind == typePostgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}
