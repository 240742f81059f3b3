// Package output holds the built-in stream outputs (stdout, drop, file,
// http). Each lives in its own file and registers itself into
// component.Default from init().
//
// An output writes a batch and reports with its error whether the batch was
// accepted; retrying a failed batch with backoff is the runtime's job, not
// the output's (bounded in-call retries, like http's retry_count, excepted).
// Outputs must never log message contents or header values, which may hold
// secrets.
package output
