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
// It advertises config_control and executes the Hub's configuration
// commands (configuration.go) in delivery order, through the node's own
// paths: configuration_validate answers the node's Report (a valid:false
// report is a successful validation), configuration_diff its DiffReport,
// and configuration_apply applies by the node's diff-apply (only changed
// streams and jobs restart), resolving ${secret:NAME} from the secrets the
// Hub resolved, and answers a wire.ConfigApplyResult. An invalid
// configuration fails it (permanent, validation_failed, the report as
// result); a node_version the node does not hold is
// config_version_unavailable; a stream that fails to start does not
// undo the apply. Validations and diffs change nothing and are not kept
// in the outcome cache (a redelivery runs them again). Once an apply
// succeeded, hub-state.json records the Hub
// version and generation it made which node version; a redelivery, or
// the same generation under another command id while the node still runs
// that version, is answered from the record, not applied again. Every
// report carries configuration {node_version, hub_version, generation},
// the Hub fields only while the node runs the recorded node version, so a
// local apply or a changed --config file shows as drift; a report follows
// every apply at once.
//
// With a job engine (Options.Engine) it also runs the jobs the Hub places
// on the node (jobs.go): job_start materializes the spec exactly as the
// node materializes its configuration and starts it as a Hub job, fenced
// with the command's generation; job_stop, job_checkpoint and
// job_savepoint answer with the artifact's wire.JobArtifact; job_validate
// is read-only and answers a wire.JobValidation. Commands for one job run
// in delivery order. The Hub desire of each job (state, generation,
// version, action id, spec) is kept in hub-state.json too: at boot the
// jobs the Hub wants running start again from their newest artifact at
// their recorded generation, so that a node a job moved away from is
// refused by the fence. Job observations (POST agent/job-observations)
// follow every job change and command, and carry the artifacts completed
// since the last ones sent.
//
// What it must not do: import internal/hub (it speaks only the wire
// types); send the node token anywhere but to register, or let it reach a
// log, event, report or error; stop or revert streams on its own (lost
// connectivity never stops a stream, and local Node API changes are
// reported as drift, not undone); change the configuration on a stream
// command (one naming a configuration version the node does not run
// fails with config_version_unavailable: the Hub applies it with
// configuration_apply first); keep, log or report a secret value the Hub
// sent (they live in memory for one command, and join the node's
// redactor).
package agent
