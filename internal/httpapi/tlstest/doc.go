// Package tlstest makes throwaway certificates for tests: a CA and a
// server certificate it signs, valid for loopback, written as PEM files.
// Nothing here is for production use, and no certificate is committed.
package tlstest
