package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/dataplane"
	"github.com/flowplane/flowplane/internal/job"
	"github.com/flowplane/flowplane/internal/state"
)

// A split job runs on several nodes. The node of the plan's first task is
// the coordinator: it chooses what every attempt restores, injects the
// barriers, collects every task's acknowledgement and writes the manifest.
// The others follow it. Each node runs its own tasks; an edge whose ends
// are on two nodes is a data-plane stream named by the attempt (its epoch),
// the edge and both subtasks.
//
// The coordinator and each follower keep a control session: one stream each
// way, re-opened whenever the link comes back. Every attempt is global: the
// coordinator starts it on every follower (start, with the epoch and the
// artifact to restore), and any failure anywhere (a task, a stream, a lost
// session) ends it everywhere (abort), after which the coordinator starts
// the next one, once every follower is back, from the newest artifact.

// Control message types.
const (
	msgHello   = "hello"   // both ways, first on every session
	msgStart   = "start"   // coordinator: run attempt Epoch, restoring Restore (none when nil)
	msgAbort   = "abort"   // coordinator: attempt Epoch is over
	msgBarrier = "barrier" // coordinator: inject barrier into your sources
	msgCommit  = "commit"  // coordinator: checkpoint Commit is durable
	msgFinish  = "finish"  // coordinator: every source ended and the final checkpoint is durable
	msgEnd     = "end"     // coordinator: the job ended in State (Error when failed)
	msgAck     = "ack"     // follower: a task acknowledged a barrier
	msgEnded   = "ended"   // follower: source task Task ended
	msgFailed  = "failed"  // follower: attempt Epoch failed here
	msgDone    = "done"    // follower: every task of attempt Epoch here finished
)

// ctlMsg is one control message. Generation is the sender's fence
// generation: messages of another generation are another placement's and
// are ignored.
type ctlMsg struct {
	Type       string       `json:"type"`
	Generation int64        `json:"generation"`
	Epoch      uint64       `json:"epoch,omitempty"`
	Restore    *ArtifactRef `json:"restore,omitempty"`
	Barrier    int64        `json:"barrier,omitempty"`
	Savepoint  bool         `json:"savepoint,omitempty"`
	Commit     int64        `json:"commit,omitempty"`
	Task       string       `json:"task,omitempty"`
	Ack        *ackMsg      `json:"ack,omitempty"`
	State      State        `json:"state,omitempty"`
	Error      string       `json:"error,omitempty"`
	Permanent  bool         `json:"permanent,omitempty"`
}

// ackMsg is a taskAck on the wire.
type ackMsg struct {
	Task       string                 `json:"task"`
	ID         int64                  `json:"id"`
	Error      string                 `json:"error,omitempty"`
	Artifact   *state.TaskArtifact    `json:"artifact,omitempty"`
	Positions  []state.SourcePosition `json:"positions,omitempty"`
	Txns       []state.SinkTxn        `json:"txns,omitempty"`
	StateBytes int64                  `json:"state_bytes,omitempty"`
}

// peerMsg is a message from a peer's session, or (down) its end.
type peerMsg struct {
	from string
	msg  ctlMsg
	down error
}

// splitRun is a split job's runtime on this node.
type splitRun struct {
	j       *Job
	self    string
	mesh    *dataplane.Mesh
	leader  string
	peers   []string            // the followers on the coordinator; the coordinator on a follower
	nodes   map[string][]string // chain -> node by subtask
	inbox   chan peerMsg
	out     map[string]chan ctlMsg // by peer: what its session sends
	endedCh chan struct{}          // closed when a follower heard the job end

	mu   sync.Mutex
	up   map[string]bool // peers whose session said hello
	wake chan struct{}   // closed and replaced when up changes
	cur  *attempt        // the attempt running now
}

// ErrNotCoordinator is returned by Checkpoint and Savepoint on a node that
// follows the coordinator of a split job.
var ErrNotCoordinator = errors.New("checkpoints and savepoints of a split job are taken by its coordinating node")

func newSplitRun(j *Job, sp *Split) (*splitRun, error) {
	p := j.plan
	if sp.Mesh == nil {
		return nil, errors.New("the job is placed split over nodes but this node has no data plane")
	}
	s := &splitRun{
		j: j, self: sp.Self, mesh: sp.Mesh, leader: p.Coordinator(sp.TaskNodes),
		nodes: map[string][]string{}, inbox: make(chan peerMsg, 64),
		out: map[string]chan ctlMsg{}, endedCh: make(chan struct{}),
		up: map[string]bool{}, wake: make(chan struct{}),
	}
	for _, c := range p.Chains {
		s.nodes[c.ID] = make([]string, c.Parallelism)
	}
	var missing []string
	mine := false
	others := map[string]bool{}
	for _, t := range p.Tasks {
		n := sp.TaskNodes[t.ID]
		switch {
		case n == "":
			missing = append(missing, t.ID)
		case n == sp.Self:
			mine = true
		default:
			others[n] = true
		}
		s.nodes[t.Chain][t.Subtask] = n
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the placement names no node for tasks %v", missing)
	}
	if !mine {
		return nil, fmt.Errorf("the placement gives node %q none of the job's tasks", sp.Self)
	}
	if s.leader == sp.Self {
		for n := range others {
			s.peers = append(s.peers, n)
		}
		slices.Sort(s.peers)
	} else {
		s.peers = []string{s.leader}
	}
	for _, n := range s.peers {
		s.out[n] = make(chan ctlMsg, 1024)
	}
	return s, nil
}

func (s *splitRun) coordinator() bool { return s.leader == s.self }

// local reports whether task id runs on this node.
func (j *Job) local(id string) bool {
	if j.split == nil {
		return true
	}
	for _, t := range j.plan.Tasks {
		if t.ID == id {
			return j.split.nodes[t.Chain][t.Subtask] == j.split.self
		}
	}
	return false
}

// start runs the sessions until ctx ends.
func (s *splitRun) start(ctx context.Context, wg *sync.WaitGroup) {
	for _, p := range s.peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(ctx, p)
		}()
	}
}

// send queues m for peer; what does not fit is dropped (the session is
// down or far behind, and the attempt fails anyway).
func (s *splitRun) send(peer string, m ctlMsg) {
	m.Generation = s.j.opts.FenceGeneration
	select {
	case s.out[peer] <- m:
	default:
		s.j.log.Warn("control message dropped", "peer", peer, "type", m.Type)
	}
}

func (s *splitRun) broadcast(m ctlMsg) {
	for _, p := range s.peers {
		s.send(p, m)
	}
}

// flush waits until the sessions sent what is queued, or d passed. It
// bounds a wait on a timer rather than reading the job's clock: nothing it
// measures is recorded, and a test clock that stands still must not hold
// the job's end.
func (s *splitRun) flush(d time.Duration) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for !s.sent() {
		select {
		case <-deadline.C:
			return
		case <-poll.C:
		}
	}
}

// sent reports whether every session's queue is empty.
func (s *splitRun) sent() bool {
	for _, c := range s.out {
		if len(c) > 0 {
			return false
		}
	}
	return true
}

// session keeps the control session with peer: a stream each way,
// re-opened after every failure.
func (s *splitRun) session(ctx context.Context, peer string) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.sessionOnce(ctx, peer)
		if ctx.Err() != nil {
			return
		}
		select {
		case s.inbox <- peerMsg{from: peer, down: err}:
		case <-ctx.Done():
			return
		}
		if sleepCtx(ctx, backoff) != nil {
			return
		}
		backoff = min(backoff*2, time.Second)
	}
}

func (s *splitRun) sessionOnce(ctx context.Context, peer string) error {
	rcv, err := s.mesh.Receive(peer, "ctl/"+peer, "control")
	if err != nil {
		return err
	}
	defer rcv.Close()
	snd, err := s.mesh.Send(ctx, peer, "ctl/"+s.self, "control")
	if err != nil {
		return err
	}
	defer snd.Close()
	out := s.out[peer]
	for len(out) > 0 { // what was queued for an earlier session
		<-out
	}
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		m := ctlMsg{Type: msgHello, Generation: s.j.opts.FenceGeneration}
		for {
			b, _ := json.Marshal(m)
			if err := snd.Send(sctx, dataplane.Frame{Kind: dataplane.KindControl, Payload: b}); err != nil {
				cancel(err)
				return
			}
			select {
			case m = <-out:
			case <-sctx.Done():
				return
			}
		}
	}()
	defer func() { <-wrote }()
	for {
		f, err := rcv.Recv(sctx)
		if err != nil {
			if c := context.Cause(sctx); c != nil && sctx.Err() != nil {
				err = c
			}
			cancel(err)
			return err
		}
		var m ctlMsg
		if f.Kind != dataplane.KindControl || json.Unmarshal(f.Payload, &m) != nil {
			err := fmt.Errorf("a malformed control message from node %s", peer)
			cancel(err)
			return err
		}
		if m.Generation != s.j.opts.FenceGeneration {
			continue // another placement's
		}
		select {
		case s.inbox <- peerMsg{from: peer, msg: m}:
		case <-sctx.Done():
		}
	}
}

// setUp records whether peer's session is up.
func (s *splitRun) setUp(peer string, up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up[peer] != up {
		s.up[peer] = up
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

// waitPeers waits until every peer's session is up.
func (s *splitRun) waitPeers(ctx context.Context) error {
	for {
		s.mu.Lock()
		all := true
		for _, p := range s.peers {
			all = all && s.up[p]
		}
		wake := s.wake
		s.mu.Unlock()
		if all {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (s *splitRun) setCurrent(r *attempt) {
	s.mu.Lock()
	s.cur = r
	s.mu.Unlock()
}

func (s *splitRun) current() *attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// lead handles the followers' messages on the coordinator until ctx ends.
func (s *splitRun) lead(ctx context.Context) {
	for {
		var pm peerMsg
		select {
		case pm = <-s.inbox:
		case <-ctx.Done():
			return
		}
		r := s.current()
		if pm.down != nil {
			s.setUp(pm.from, false)
			if r != nil {
				r.fail(fmt.Errorf("lost the control session with node %s: %w", pm.from, pm.down))
			}
			continue
		}
		m := pm.msg
		if m.Type == msgHello {
			s.setUp(pm.from, true)
			continue
		}
		if r == nil || m.Epoch != r.epoch {
			continue // an earlier attempt's
		}
		switch m.Type {
		case msgAck:
			a := m.Ack
			if a == nil {
				continue
			}
			ack := taskAck{task: a.Task, id: a.ID, artifact: a.Artifact, positions: a.Positions, txns: a.Txns, stateBytes: a.StateBytes}
			if a.Error != "" {
				ack.err = errors.New(a.Error)
			}
			select {
			case r.acks <- ack:
			case <-r.over:
			}
		case msgEnded:
			select {
			case r.ended <- m.Task:
			case <-r.over:
			}
		case msgFailed:
			err := fmt.Errorf("node %s: %s", pm.from, m.Error)
			if m.Permanent {
				err = &permanentError{err}
			}
			r.fail(err)
		case msgDone:
			r.followerDone(pm.from)
		}
	}
}

// followerDone records that a follower's tasks of the attempt finished.
func (r *attempt) followerDone(node string) {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	if r.waiting[node] {
		delete(r.waiting, node)
		if len(r.waiting) == 0 {
			close(r.allDone)
		}
	}
}

// remote reaches the sources and tasks of other nodes on behalf of the
// coordinator (nil but on the coordinator of a split job).
func (r *attempt) remoteBarrier(b barrier) {
	if r.split != nil {
		r.split.broadcast(ctlMsg{Type: msgBarrier, Epoch: r.epoch, Barrier: b.id, Savepoint: b.savepoint})
	}
}

func (r *attempt) remoteCommit(id int64) {
	if r.split != nil {
		r.split.broadcast(ctlMsg{Type: msgCommit, Epoch: r.epoch, Commit: id})
	}
}

func (r *attempt) remoteFinish() {
	if r.split != nil {
		r.split.broadcast(ctlMsg{Type: msgFinish, Epoch: r.epoch})
	}
}

// streamName names the stream of edge ei from subtask i to subtask k in
// this attempt.
func (r *attempt) streamName(ei, i, k int) string {
	return "d/" + strconv.FormatUint(r.epoch, 16) + "/" + strconv.Itoa(ei) + "/" + strconv.Itoa(i) + "/" + strconv.Itoa(k)
}

// netOutlet is the sending end of a stream to a subtask on another node.
// The stream is opened on the first element: opening waits for the link.
type netOutlet struct {
	mesh              *dataplane.Mesh
	peer, name, label string
	snd               *dataplane.Sender
	buf               []byte // reused: Send keeps no payload once it returned
}

func (o *netOutlet) send(ctx context.Context, e element) error {
	if o.snd == nil {
		s, err := o.mesh.Send(ctx, o.peer, o.name, o.label)
		if err != nil {
			return fmt.Errorf("edge %s to node %s: %w", o.label, o.peer, err)
		}
		o.snd = s
	}
	f, err := encodeElement(e, o.buf)
	if err != nil {
		return fmt.Errorf("edge %s: %w", o.label, err)
	}
	o.buf = f.Payload[:0]
	if err := o.snd.Send(ctx, f); err != nil {
		return fmt.Errorf("edge %s to node %s: %w", o.label, o.peer, err)
	}
	return nil
}

func (r *attempt) netOutlet(ei int, e *job.Edge, i, k int, downChain string) outlet {
	o := &netOutlet{mesh: r.split.mesh, peer: r.split.nodes[downChain][k], name: r.streamName(ei, i, k), label: e.ID}
	r.closers = append(r.closers, func() {
		if o.snd != nil {
			_ = o.snd.Close()
		}
	})
	return o
}

func (r *attempt) netInlet(ei int, e *job.Edge, i, k int, upChain string) (*dataplane.Receiver, error) {
	rcv, err := r.split.mesh.Receive(r.split.nodes[upChain][i], r.streamName(ei, i, k), e.ID)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, func() { _ = rcv.Close() })
	return rcv, nil
}

// newEpoch names a new attempt of the job.
func newEpoch() uint64 {
	for {
		if e := rand.Uint64(); e != 0 {
			return e
		}
	}
}

// refOf names the artifact m (nil for none).
func refOf(m *state.Manifest) *ArtifactRef {
	if m == nil {
		return nil
	}
	return &ArtifactRef{Kind: m.Kind, ID: m.ID}
}

// follow is a follower's Run: it runs the attempts the coordinator starts
// until the coordinator ends the job or ctx ends.
func (j *Job) follow(ctx context.Context) error {
	s := j.split
	var wg sync.WaitGroup
	sctx, stopSessions := context.WithCancel(ctx)
	defer func() {
		stopSessions()
		wg.Wait()
	}()
	s.start(sctx, &wg)
	leader := s.leader

	type result struct {
		epoch uint64
		out   outcome
		err   error
	}
	var (
		cur     *attempt
		cancel  context.CancelFunc
		results = make(chan result, 1)
		running bool
	)
	stop := func() {
		if !running {
			return
		}
		cancel()
		<-results
		running = false
		cur = nil
	}
	defer stop()
	inst := j.first
	j.first = nil
	for {
		select {
		case res := <-results:
			running = false
			cur = nil
			switch {
			case res.out == outCompleted:
				s.send(leader, ctlMsg{Type: msgDone, Epoch: res.epoch})
			case res.err != nil:
				j.log.Warn("attempt failed on this node", "error", res.err)
				s.send(leader, ctlMsg{Type: msgFailed, Epoch: res.epoch, Error: res.err.Error(), Permanent: permanent(res.err)})
				j.setState(Recovering, res.err)
			}
		case pm := <-s.inbox:
			if pm.down != nil {
				if running {
					j.log.Warn("lost the coordinator; waiting for it", "node", leader, "error", pm.down)
					stop()
					j.setState(Recovering, fmt.Errorf("lost the control session with the coordinating node %s: %w", leader, pm.down))
				}
				continue
			}
			m := pm.msg
			switch m.Type {
			case msgStart:
				stop()
				if inst == nil {
					var err error
					if inst, err = j.construct(); err != nil {
						s.send(leader, ctlMsg{Type: msgFailed, Epoch: m.Epoch, Error: err.Error(), Permanent: true})
						j.setState(Failed, err)
						continue
					}
				}
				mode := RecoverNone
				if m.Restore != nil {
					mode = RecoverArtifact
				}
				actx, c := context.WithCancel(ctx)
				cancel, running = c, true
				r := j.newAttempt(m.Epoch, m.Restore)
				cur = r
				go func(inst *instances) {
					out, _, err := j.runAttempt(actx, r, inst, mode)
					results <- result{epoch: r.epoch, out: out, err: err}
				}(inst)
				inst = nil
			case msgAbort:
				if cur != nil && cur.epoch == m.Epoch {
					stop()
					j.setState(Recovering, nil)
				}
			case msgBarrier, msgCommit, msgFinish:
				if cur != nil && cur.epoch == m.Epoch {
					cur.fromCoordinator(m)
				}
			case msgEnd:
				stop()
				close(s.endedCh)
				var err error
				if m.Error != "" {
					err = errors.New(m.Error)
				}
				j.setState(m.State, err)
				return err
			}
		case <-ctx.Done():
			stop()
			j.setState(Stopped, nil)
			return nil
		}
	}
}

// fromCoordinator applies a barrier, commit or finish of the coordinator
// to this node's tasks. It may run before the attempt's tasks started:
// their control channels and commit marks wait for them.
func (r *attempt) fromCoordinator(m ctlMsg) {
	select {
	case <-r.assembled:
	case <-r.over:
		return
	}
	switch m.Type {
	case msgBarrier:
		for _, t := range r.sources {
			select {
			case t.control <- control{kind: ctlBarrier, b: barrier{id: m.Barrier, savepoint: m.Savepoint}}:
			case <-r.over:
				return
			}
		}
	case msgCommit:
		for _, t := range r.tasks {
			if t.commitUpTo.Load() < m.Commit {
				t.commitUpTo.Store(m.Commit)
			}
			select {
			case t.commitWake <- struct{}{}:
			default:
			}
		}
	case msgFinish:
		for _, t := range r.sources {
			select {
			case t.control <- control{kind: ctlFinish}:
			case <-r.over:
				return
			}
		}
	}
}

// relay sends this node's acknowledgements and ended sources to the
// coordinator: a follower's stand-in for the coordinator.
func (r *attempt) relay(ctx context.Context) {
	s := r.split
	for {
		select {
		case a := <-r.acks:
			m := &ackMsg{Task: a.task, ID: a.id, Artifact: a.artifact, Positions: a.positions, Txns: a.txns, StateBytes: a.stateBytes}
			if a.err != nil {
				m.Error = a.err.Error()
			}
			s.send(s.leader, ctlMsg{Type: msgAck, Epoch: r.epoch, Ack: m})
		case id := <-r.ended:
			s.send(s.leader, ctlMsg{Type: msgEnded, Epoch: r.epoch, Task: id})
		case <-ctx.Done():
			return
		}
	}
}
