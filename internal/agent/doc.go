// Package agent is the Agent: the client side of the Hub agent protocol
// (API.md "Agent protocol"), run inside a node process whose
// health_check.hub_urls is set. It registers with the first Hub that
// answers (failing over in order, with jittered capped backoff), keeps the
// session alive (re-registering on 401 and before the session expires),
// heartbeats the lease, reports the node's observed streams on every change
// and periodically, and long-polls commands, which it carries out as
// node-local operations (actor "hub", correlation id = the command id), so
// that the node's own operation records and events show them.
//
// The Hub desire the Agent last applied to each stream (state, generation,
// config version, action id) and the outcomes of the last commands it
// executed are kept durably in <state dir>/agent/hub-state.json: after a
// restart the node reports the same generations, re-applies the Hub's
// desire at boot (a stream the Hub wants stopped is never started, see
// Stopped), and a redelivered command is answered from the outcome cache
// instead of being run twice.
//
// What it must not do: import internal/hub (it speaks only the wire
// types); send the node token anywhere but to register, or let it reach a
// log, event, report or error; stop or revert streams on its own (lost
// connectivity never stops a stream, and local Node API changes are
// reported as drift, not undone); apply configurations (a command for a
// configuration version other than the applied one fails with
// config_version_unavailable until configuration dispatch lands).
package agent
