// Package rollout is the rollout state machine of the Hub: pure decisions,
// no I/O, the clock passed in.
//
// A rollout applies one configuration to a set of nodes, wave by wave.
// The Hub keeps a Rollout durably; every reconciler pass it calls Step with
// what it observes of the nodes and stores the Rollout Step returns
// together with the Effects (apply intents, events) in one store
// transaction, so a Hub killed at any point continues from the last
// committed Rollout. Act applies an operator action (pause, resume,
// cancel, rollback) the same way.
//
// The package must not do I/O, read the clock, log, start goroutines or
// keep state; it imports no flowplane package but internal/wire.
//
// # Rules
//
//   - Waves are fixed at creation (Waves, New). The first Step moves a
//     pending rollout to running and starts wave 1. A wave k+1 starts
//     only when wave k passed its gate (WavePassed set) and Plan.Pause
//     elapsed after it (WavePassed + Pause <= now), while running.
//   - Starting a wave emits one EffectApply per node of the wave that is
//     active (any Observation.Mode but draining and maintenance; a node
//     without an observation is offline and active). Its phase becomes
//     applying, AppliedAt now, VersionBefore / NodeVersionBefore what the
//     observation says it runs, Generation 0. An offline node gets its
//     apply (the Hub dispatches it when the node returns) and is gated
//     like the others. A node that is draining or in maintenance stays
//     waiting (it is not failed, and does not hold its wave's gate): it
//     gets its apply at the first Step that sees it active again while
//     the rollout is running (never while paused, cancelled, failed,
//     succeeded or rolled_back), and is then gated on its own.
//   - Generation 0 means "not yet set": Step and Act clear it whenever
//     they emit an apply for a node, and the caller sets it (SetGeneration)
//     in the same transaction. While it is 0, a node's observation is not
//     judged (InSync, ApplyFailed are about Node.Generation), only its
//     timeout runs.
//   - The health gate of a node: applying -> soaking when its
//     configuration is in_sync at the rollout's generation
//     (Observation.InSync) and no stream of it is failed; HealthySince is
//     then now. soaking -> passed once it stayed so for Soak (Soak 0:
//     applying -> passed directly). It fails (phase failed, Failures+1):
//     at once when its apply intent failed (Observation.ApplyFailed; the
//     observation's code and message, "apply_failed" without a code);
//     while applying, when GateTimeout passed since AppliedAt
//     ("gate_timeout"; a node seen healthy at that Step passes instead);
//     while soaking, when a stream fails ("stream_failed") or the
//     configuration leaves in_sync ("out_of_sync"). GateTimeout bounds the
//     wait for in_sync only: a node that reached it is soaked for the whole
//     Soak (wire: gate_timeout_ms is how long nodes have to report in_sync,
//     soak_ms how long they must then stay so). GateTimeout <= 0 means no
//     timeout (the Hub applies its default at creation).
//   - Failures counts the nodes that failed their gate. When it exceeds
//     MaxFailures the rollout is failed at once (FailureCode
//     "failure_budget_exceeded", FinishedAt set), also while paused: no
//     later wave is touched, and every node still waiting, in any wave, is
//     skipped; nodes still applying or soaking are left as they are (their
//     intents stay; they are not rolled back unless asked).
//   - A wave passes when each of its nodes passed or failed (within the
//     budget), waiting nodes aside; WavePassed is then set (also while
//     paused: the pause counts from it). When every node passed or failed
//     within the budget, the running rollout succeeded (a waiting node
//     holds success until it got its apply and was gated).
//   - pause: pending or running -> paused; no new wave starts and no
//     waiting node gets its apply; the gate of nodes already applying
//     keeps being evaluated (their intents are out), but the rollout does
//     not move to the next wave nor succeed. resume: paused -> running (a
//     rollout paused while pending starts wave 1 at the next Step).
//     cancel: pending, running or paused -> cancelled (FinishedAt set);
//     nothing more is dispatched; waiting nodes are skipped, applying and
//     soaking ones left as they are.
//   - rollback: from any state but rolled_back, when at least one node was
//     touched (a rollout with none, e.g. pending, is refused: cancel it).
//     Every touched node (phase applying, soaking, passed or failed) gets
//     an EffectApply with Rollback set, Version its VersionBefore and
//     NodeVersion its NodeVersionBefore, phase rolling_back, AppliedAt now,
//     Generation 0; its failure, if any, is kept. A touched node with both
//     VersionBefore and NodeVersionBefore empty (the Hub knew of no
//     configuration on it) gets no apply: it is failed with
//     "rollback_unavailable". Untouched nodes are skipped. The rollout is
//     rolled_back at once (FinishedAt now). Step then moves each
//     rolling_back node to rolled_back when in_sync at the rollback's
//     generation, or to failed (the observation's code, message prefixed
//     "rollback: ") when the rollback's intent failed; there is no timeout
//     beyond the intent's own expiry. Failures counts gate failures only.
//   - Any other action, or one the state does not allow, is ErrAction.
//   - Every change of the rollout (state, current wave, wave passed) and
//     every node phase change produces exactly one EffectEvent; a Step that
//     changes nothing returns no effects and an equal Rollout. Step
//     reaches a fixed point: stepping its result again with the same
//     observations and now changes nothing.
//   - Step never returns an effect for a node that is not a target, never
//     deletes a node record, and never modifies its input. succeeded,
//     failed and cancelled rollouts are left as they are by Step.
package rollout
