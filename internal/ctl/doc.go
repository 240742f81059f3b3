// Package ctl is `flowplane ctl`, the operator's client of the Hub's
// operator API: named contexts (Hub URL, where the token comes from, CA
// file), tables and -o json|yaml views of the fleet, the write verbs with
// --wait (follow the event stream until the resource converges, the
// operation fails or the time is up), and shell completion.
//
// It speaks only HTTP and the wire types (internal/wire); it must not
// import the Hub, the node or the engine, so that what it does is exactly
// what any other API client can do. It never prints, logs or stores a
// token except in a token file of its own (0600) written by login.
package ctl
