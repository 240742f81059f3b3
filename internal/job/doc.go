// Package job turns a job specification into a plan: the validated operator
// graph, its chains, its tasks (one per chain and subtask), the key-group
// ranges of every subtask and a JSON explanation of all of it.
//
// It is pure: nothing here does I/O or keeps time. The plan is what
// --validate checks, what the Hub serves at /jobs/{id}/plan and what the
// kernel runs.
package job
