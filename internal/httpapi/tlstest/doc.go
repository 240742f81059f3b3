// Package tlstest makes throwaway certificates for tests: a CA and a
// server certificate it signs, valid for loopback, written as PEM files,
// and a check of the cipher suites a TLS server accepts.
// Nothing here is for production use, and no certificate is committed.
package tlstest
