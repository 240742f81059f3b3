package input

import (
	"errors"
	"fmt"
)

// share is the part of a numbered sequence that one subtask of a split
// input reads: the numbers of the finite catch-up lanes a rescale left it,
// lowest first, then its main lane next, next+stride, ... Numbers at or
// above limit do not exist (limit -1: no end). The inputs that generate
// their data from a number (generate, nexmark) keep their reading position
// as a share, so that a job restored at another parallelism hands what
// the old subtasks left unread to the new ones exactly once.
//
// Without a rescale there are no catch-up lanes and a share is
// next/stride alone, which the inputs' hot loops read directly.
type share struct {
	base    int64 // the first number of the sequence (generate's is 1)
	next    int64 // the main lane's next number
	stride  int64 // the main lane's step: the parallelism it was split for
	limit   int64 // -1: unlimited
	catchUp []lane
}

// lane is a finite run of numbers Next, Next+Stride, ... below End that a
// rescale moved to another subtask.
type lane struct {
	Next   int64 `json:"next"`
	Stride int64 `json:"stride"`
	End    int64 `json:"end"`
}

func newShare(base, limit int64) share {
	return share{base: base, next: base, stride: 1, limit: limit}
}

// split makes the share the numbers n with (n-base) mod subtasks == subtask.
func (s *share) split(subtask, subtasks int) error {
	if subtasks < 1 || subtask < 0 || subtask >= subtasks {
		return fmt.Errorf("subtask %d of %d is out of range", subtask, subtasks)
	}
	s.next, s.stride, s.catchUp = s.base+int64(subtask), int64(subtasks), nil
	return nil
}

// subtask is the residue of the main lane: the subtask Split made this.
func (s *share) subtask() int64 { return mod(s.next-s.base, s.stride) }

func mod(a, n int64) int64 { return ((a % n) + n) % n }

// end is the exclusive end of l within the sequence.
func (s *share) end(l lane) int64 {
	if s.limit >= 0 {
		return min(l.End, s.limit)
	}
	return l.End
}

// ended reports that nothing is left.
func (s *share) ended() bool {
	return len(s.catchUp) == 0 && s.limit >= 0 && s.next >= s.limit
}

// mainLeft is how many numbers the main lane has left; -1 when unlimited.
func (s *share) mainLeft() int64 {
	if s.limit < 0 {
		return -1
	}
	if s.next >= s.limit {
		return 0
	}
	return (s.limit-s.next-1)/s.stride + 1
}

// takeCatchUp appends up to n numbers of the catch-up lanes to dst, the
// lowest first, dropping lanes as they run out.
func (s *share) takeCatchUp(dst []int64, n int) []int64 {
	for len(s.catchUp) > 0 && n > 0 {
		lo := 0
		for i := range s.catchUp {
			if s.catchUp[i].Next < s.catchUp[lo].Next {
				lo = i
			}
		}
		l := &s.catchUp[lo]
		dst = append(dst, l.Next)
		l.Next += l.Stride
		n--
		if l.Next >= s.end(*l) {
			s.catchUp = append(s.catchUp[:lo], s.catchUp[lo+1:]...)
		}
	}
	return dst
}

// seek sets the position: the main lane continues at the first number of
// its residue at or after next, after the catch-up lanes.
func (s *share) seek(next int64, lanes []lane) error {
	if next < s.base {
		return fmt.Errorf("next %d is below the first number %d", next, s.base)
	}
	r := s.subtask()
	s.next = next + mod(r-(next-s.base), s.stride)
	s.catchUp = s.catchUp[:0]
	for _, l := range lanes {
		if l.Stride < 1 || l.Next < s.base {
			return errors.New("a catch_up lane needs stride >= 1 and next at or above the first number")
		}
		if l.Next < s.end(l) {
			s.catchUp = append(s.catchUp, l)
		}
	}
	return nil
}

// rescale gives subtask of subtasks its part of what old subtasks left: each
// old main lane up to the highest of them and every old catch-up lane
// become catch-up lanes, dealt round robin, and the numbers from the
// highest old main lane on are split anew. mains[i] is old subtask i's
// main-lane next (len(mains) its old parallelism), lanes every old
// catch-up lane in old subtask order.
func (s *share) rescale(mains []int64, lanes []lane, subtask, subtasks int) error {
	if len(mains) == 0 {
		return errors.New("no old positions")
	}
	if err := s.split(subtask, subtasks); err != nil {
		return err
	}
	high := mains[0]
	for _, m := range mains {
		high = max(high, m)
	}
	var all []lane
	for _, m := range mains {
		if m < high {
			all = append(all, lane{Next: m, Stride: int64(len(mains)), End: high})
		}
	}
	all = append(all, lanes...)
	var mine []lane
	for i, l := range all {
		if i%subtasks == subtask {
			mine = append(mine, l)
		}
	}
	return s.seek(high, mine)
}
