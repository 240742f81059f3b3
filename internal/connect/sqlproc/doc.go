// Package sqlproc is the sql processor: ArkFlow's SQL over a batch, run by
// internal/sqlengine (SQLite) over the batch's columnar form, optionally
// joined with tables looked up in the stream's temporaries.
//
// It holds no SQL engine of its own and never writes: the engine refuses
// everything but one SELECT.
package sqlproc
