// Package console embeds the Hub's web console (built from this
// directory's TypeScript sources into dist/, which is committed) and serves
// it: the Hub mounts a Site at Path. The console is static: it calls only
// the operator API, with the operator token the user enters, so serving it
// needs no credential. Every answer carries a Content-Security-Policy that
// allows this origin only and no inline script or style.
package console
