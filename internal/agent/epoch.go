package agent

import "sync/atomic"

// epochs is the highest leader epoch the Agent has seen, in a register or
// heartbeat answer or on a command (wire.Command.Epoch). A command of an
// older epoch comes from a Hub that lost the leader lease since: the Agent
// refuses it without running it. Epoch 0 is a Hub without a lease (an older
// build): never refused. It is not kept across restarts: the first
// registration teaches it again.
type epochs struct{ max atomic.Int64 }

// see raises the highest epoch to e. A nil epochs sees nothing.
func (s *epochs) see(e int64) {
	if s == nil {
		return
	}
	for {
		cur := s.max.Load()
		if e <= cur || s.max.CompareAndSwap(cur, e) {
			return
		}
	}
}

// admit reports whether a command of epoch e may run, and records e; when
// not, it returns the newer epoch seen.
func (s *epochs) admit(e int64) (ok bool, seen int64) {
	if e == 0 || s == nil {
		return true, 0
	}
	s.see(e)
	if cur := s.max.Load(); e < cur {
		return false, cur
	}
	return true, 0
}
