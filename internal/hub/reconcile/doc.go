// Package reconcile holds the pure decisions of the Hub's reconciler:
// convergence of one resource, the dispatch plan for the outbox, attempt
// expiry and retry backoff, which nodes the node GC forgets, and whether
// a Hub leads (Leadership).
//
// Every function is a pure function of its input, now included: the package
// must not do I/O, read the clock, start goroutines, log or keep state. The
// Hub maps its store rows onto these input structs and applies the output
// in its own transaction.
//
// # Convergence
//
// Convergence(in) is decided by the first row that applies (API.md
// "States"). "Matches" means same state, generation and config_version (a
// desire without a config_version accepts whatever version the node runs),
// and for a restart (Desired.ActionID set) the same action_id. "Erroring" means
// the observation carries a LastError (within ErrorWindow of LastErrorAt
// when both are set). An observation is "stale" unless the node is online
// and Fresh (it reported since the Hub started and since it last came back
// online): a stale observation is kept and shown, but never judged.
//
// Rows marked (job) apply only with ConvergenceInput.Job; for a stream
// they are skipped, and a stream's observed completed or recovering is
// judged like any other state. For a job desired running, an observation
// "completed" that matches but for its state counts as matching: a bounded
// job that finished is in sync.
//
//	desired absent                                       unknown   no_desired
//	(job) desired running, node unavailable              degraded  node_lost
//	observation matches, stale                           unknown   stale
//	observation matches, erroring                        degraded  erroring
//	(job) observation completed, desired running         in_sync   completed
//	observation matches                                  in_sync   match
//	no attempt, no observation                           unknown   no_observation
//	no attempt, observation stale                        unknown   stale
//	no attempt, observation state failed                 degraded  observed_failed
//	(job) no attempt, observation state recovering       degraded  recovering
//	no attempt, observation erroring                     degraded  erroring
//	no attempt, observation differs                      degraded  drift
//	attempt pending, node online lacks a capability      blocked   incompatible_capability
//	attempt pending, node draining / in maintenance      blocked   draining / maintenance
//	attempt pending, intent expired                      blocked   expired
//	attempt pending, retry under way                     degraded  retrying
//	attempt pending, node not online                     pending   node_offline
//	attempt pending                                      pending   not_dispatched
//	attempt dispatched/acknowledged, retry under way     degraded  retrying
//	attempt dispatched / acknowledged                    applying  dispatched / acknowledged
//	attempt succeeded, observed generation >= desired    unknown   stale (observation stale)
//	attempt succeeded, observed generation >= desired    degraded  observed_failed / recovering (job) / erroring / drift
//	attempt succeeded, observation older or absent       applying  awaiting_report
//	attempt failed/timed_out, permanent code             blocked   <code>
//	attempt failed/timed_out, intent expired             blocked   expired
//	attempt failed/timed_out, retry, node suspended      blocked   draining / maintenance
//	attempt failed/timed_out, retry under way            degraded  retrying
//	attempt failed/timed_out, no retry                   blocked   <code> or failed / timed_out
//	attempt cancelled                                    blocked   cancelled
//	attempt superseded                                   pending   superseded
//	attempt in any other state                           unknown   unknown_attempt_state
//
// Permanent codes are incompatible_capability, expired and node_unavailable.
// Acknowledgement never yields in_sync, and a matching fresh observation
// yields in_sync whatever the attempt's state: convergence comes from
// reports, and only from reports that describe the present. Rows that do
// not look at the observation (pending, applying, blocked, retrying) are
// the same whether it is stale or not.
//
// node_lost comes before everything else because a job desired running on
// a node whose lease lapsed is not running anywhere the Hub can see,
// whatever the attempt: it is degraded, not merely unknown, and the Hub may
// move it. A node never seen (unknown) is not lost, and a job desired
// stopped on a lost node is not harmed: both keep the rows below (stale,
// pending, ...). recovering is judged where failed is: only in a fresh
// observation with no work under way.
//
// # Dispatch
//
// PlanDispatch(in) gives every outbox row exactly one decision, first row
// that applies. Rows compete for a node's queue oldest first (CreatedAt,
// then IntentID).
//
//	intent expired (now >= ExpiresAt), node not online   fail      node_unavailable
//	intent expired                                       fail      expired
//	node not online (unavailable, unknown, missing)      wait      node_offline, NextAt = expiry
//	node lacks a required capability                    fail      incompatible_capability
//	node draining / in maintenance                       wait      draining / maintenance
//	backoff since LastFinishedAt not elapsed             wait      backoff, NextAt = end of backoff
//	Active + dispatched in this plan >= QueueBound       wait      capacity (Code capacity)
//	otherwise                                            dispatch  attempt expiry = min(now+TTL, intent expiry)
//
// Draining and maintenance suppress new dispatch only: attempts in flight
// are not PlanDispatch's input and are never touched. ExpireAttempts turns
// attempts in flight past their expiry into timed_out; Backoff(n) is the wait
// after the n-th attempt: initial * 2^(n-1), capped.
package reconcile
