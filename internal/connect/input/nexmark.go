package input

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowplane/flowplane/internal/component"
	"github.com/flowplane/flowplane/internal/message"
)

func init() {
	component.Default.RegisterInput(component.Spec{
		Name: "nexmark",
		Summary: "Generates the Nexmark benchmark's event stream (as the Beam and Flink Nexmark generators do): " +
			"people, auctions and bids in the proportion 1 : 3 : 46, with ids derived from the event number, " +
			"bids concentrated on hot auctions and hot bidders, and event times advancing at " +
			"`events_per_second`. Each message is a structured object (no JSON bytes) with `event_type` " +
			"(`person`, `auction` or `bid`), `date_time` (event time, ms since the Unix epoch) and one of " +
			"`person` {id, name, email_address, credit_card, city, state, date_time, extra}, `auction` {id, " +
			"item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra} or " +
			"`bid` {auction, bidder, price, channel, url, date_time, extra}; numbers are floats, as decoded " +
			"JSON would be, and prices are in cents. The stream is a function of `seed` and the event number: " +
			"in a job it can run at any parallelism (subtask i of n generates the events whose number is i " +
			"mod n) and resumes from its checkpointed position, also at another parallelism (the event " +
			"numbers the old subtasks left are dealt to the new ones), replaying identical events.",
		Schema: component.ObjectSchema(map[string]any{
			"count": func() map[string]any {
				p := component.Prop("integer", "Number of events to generate (event numbers 0 to count-1), after which the input ends.", nil)
				p["minimum"] = 1
				return p
			}(),
			"seed": component.Prop("integer", "Seed of the generator; one seed always gives the same events.", 0),
			"batch_size": func() map[string]any {
				p := component.Prop("integer", "Maximum number of events per batch.", nexmarkDefaultBatch)
				p["minimum"] = 1
				return p
			}(),
			"first_event_time_ms": component.Prop("integer", "Event time of event 0, in milliseconds since the Unix epoch.",
				nexmarkDefaultFirstTime),
			"events_per_second": func() map[string]any {
				p := component.Prop("integer", "Event-time rate: event n has the time first_event_time_ms + "+
					"floor(n * 1000 / events_per_second). It does not pace generation, which runs as fast as it "+
					"is read. The default 10000 (0.1 ms apart) matches the Nexmark generators' default rate.",
					nexmarkDefaultRate)
				p["minimum"] = 1
				return p
			}(),
		}, "count"),
		Example: `type: nexmark
count: 1000
seed: 0
batch_size: 100
first_event_time_ms: 1700000000000
events_per_second: 10000
`,
	}, NewNexmark)
}

var (
	_ component.Rescalable = (*Nexmark)(nil)
)

const (
	nexmarkDefaultBatch     = 1024
	nexmarkDefaultFirstTime = 1_700_000_000_000
	nexmarkDefaultRate      = 10_000
)

// NexmarkConfig is the configuration of the nexmark input.
type NexmarkConfig struct {
	Count            int64 `json:"count"`
	Seed             int64 `json:"seed"`
	BatchSize        int   `json:"batch_size"`
	FirstEventTimeMs int64 `json:"first_event_time_ms"`
	EventsPerSecond  int64 `json:"events_per_second"`
}

// Nexmark generates the Nexmark event stream. Every event is a pure
// function of the seed and its event number, which makes splitting and
// replaying trivial: an instance generates the numbers of its share (the
// catch-up lanes of a rescale, then next, next+stride, …) below count.
type Nexmark struct {
	count     int64
	seed      uint64
	batchSize int
	firstTime int64
	rate      int64

	nums    share // owned by the goroutine that calls Read
	scratch []int64
}

// NewNexmark builds a nexmark input from its configuration.
func NewNexmark(conf map[string]any, _ component.Resources) (component.Input, error) {
	c := NexmarkConfig{BatchSize: nexmarkDefaultBatch, FirstEventTimeMs: nexmarkDefaultFirstTime, EventsPerSecond: nexmarkDefaultRate}
	if err := component.Decode(conf, &c); err != nil {
		return nil, err
	}
	var errs []error
	if c.Count <= 0 {
		errs = append(errs, fmt.Errorf("count: must be positive, got %d", c.Count))
	}
	if err := checkBatchSize(c.BatchSize); err != nil {
		errs = append(errs, err)
	}
	if c.EventsPerSecond <= 0 {
		errs = append(errs, fmt.Errorf("events_per_second: must be positive, got %d", c.EventsPerSecond))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	nexmarkTablesOnce.Do(buildNexmarkTables)
	return &Nexmark{
		count: c.Count, seed: uint64(c.Seed), batchSize: c.BatchSize,
		firstTime: c.FirstEventTimeMs, rate: c.EventsPerSecond, nums: newShare(0, c.Count),
	}, nil
}

// Connect does nothing: there is nothing to reach.
func (x *Nexmark) Connect(context.Context) error { return nil }

// Split makes this instance generate the events n with n mod subtasks ==
// subtask.
func (x *Nexmark) Split(subtask, subtasks int) error {
	if err := x.nums.split(subtask, subtasks); err != nil {
		return fmt.Errorf("nexmark: %w", err)
	}
	return nil
}

// nexmarkPosition is the checkpointed position of a nexmark input.
type nexmarkPosition struct {
	Next    int64  `json:"next"`               // number of the next event of the main lane
	CatchUp []lane `json:"catch_up,omitempty"` // numbers a rescale added, generated first
}

// Position returns the number of the next event and the catch-up lanes.
func (x *Nexmark) Position() ([]byte, error) {
	return json.Marshal(nexmarkPosition{Next: x.nums.next, CatchUp: x.nums.catchUp})
}

func parseNexmarkPosition(pos []byte) (nexmarkPosition, error) {
	var p nexmarkPosition
	if err := json.Unmarshal(pos, &p); err != nil {
		return p, fmt.Errorf("nexmark: position %s: %w", pos, err)
	}
	return p, nil
}

// Seek continues at a Position of an instance with the same split.
func (x *Nexmark) Seek(_ context.Context, pos []byte) error {
	p, err := parseNexmarkPosition(pos)
	if err != nil {
		return err
	}
	if p.Next < 0 || p.Next%x.nums.stride != x.nums.subtask() {
		return fmt.Errorf("nexmark: position %s is not one of subtask %d of %d", pos, x.nums.subtask(), x.nums.stride)
	}
	if err := x.nums.seek(p.Next, p.CatchUp); err != nil {
		return fmt.Errorf("nexmark: position %s: %w", pos, err)
	}
	return nil
}

// Rescale deals out the events the old subtasks left.
func (x *Nexmark) Rescale(old [][]byte) ([]byte, error) {
	mains := make([]int64, len(old))
	var lanes []lane
	for i, raw := range old {
		mains[i] = int64(i)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		p, err := parseNexmarkPosition(raw)
		if err != nil {
			return nil, err
		}
		mains[i], lanes = p.Next, append(lanes, p.CatchUp...)
	}
	s := x.nums
	if err := s.rescale(mains, lanes, int(s.subtask()), int(s.stride)); err != nil {
		return nil, fmt.Errorf("nexmark: %w", err)
	}
	return json.Marshal(nexmarkPosition{Next: s.next, CatchUp: s.catchUp})
}

// Read returns the next batch_size events, or message.ErrEndOfInput after
// the last.
func (x *Nexmark) Read(ctx context.Context) (message.Batch, message.AckFunc, error) {
	if err := ctx.Err(); err != nil {
		return message.Batch{}, nil, err
	}
	if x.nums.ended() {
		return message.Batch{}, nil, message.ErrEndOfInput
	}
	if len(x.nums.catchUp) > 0 {
		x.scratch = x.nums.takeCatchUp(x.scratch[:0], x.batchSize)
		msgs := make([]message.Message, len(x.scratch))
		for i, n := range x.scratch {
			msgs[i] = x.message(n)
		}
		return message.Batch{Messages: msgs}, message.NoopAck, nil
	}
	n := min(int64(x.batchSize), x.nums.mainLeft())
	msgs := make([]message.Message, n)
	for i := range msgs {
		msgs[i] = x.message(x.nums.next)
		x.nums.next += x.nums.stride
	}
	return message.Batch{Messages: msgs}, message.NoopAck, nil
}

// message is event number n.
func (x *Nexmark) message(n int64) message.Message {
	ev, ms := x.event(n)
	m := message.NewStructured(ev)
	m.Meta.Source = "nexmark"
	m.Meta.Offset = n
	m.Meta.Timestamp = time.UnixMilli(ms)
	return m
}

// Close does nothing.
func (x *Nexmark) Close(context.Context) error { return nil }

// The Nexmark model. Names and constants follow the Beam and Flink
// generators; the random numbers do not (each event draws from its own
// SplitMix64 stream seeded by the seed and the event number).
const (
	nxPersonProportion  = 1
	nxAuctionProportion = 3
	nxBidProportion     = 46
	nxProportionDenom   = nxPersonProportion + nxAuctionProportion + nxBidProportion

	nxFirstPersonID   = 1000
	nxFirstAuctionID  = 1000
	nxFirstCategoryID = 10
	nxNumCategories   = 5

	nxNumActivePeople     = 1000 // people a new auction or bid may name
	nxNumInFlightAuctions = 100  // auctions a bid may name
	nxPersonIDLead        = 10   // how far past the newest person a reference may reach
	nxAuctionIDLead       = 10

	// One in ratio of the auctions, sellers and bidders are drawn at
	// random; the others are the hot one of their group.
	nxHotAuctionRatio = 2
	nxHotSellersRatio = 4
	nxHotBiddersRatio = 4
	nxHotGroup        = 100 // ids are grouped by 100; each group has one hot id

	nxAvgPersonBytes  = 200
	nxAvgAuctionBytes = 500
	nxAvgBidBytes     = 100

	nxChannels         = 10_000
	nxHotChannelsRatio = 2 // one in 2 bids come through a hot channel
	nxMinStringLen     = 3
)

// event builds event n and returns it with its event time.
func (x *Nexmark) event(n int64) (map[string]any, int64) {
	ms := x.time(n)
	dt := any(float64(ms))
	r := nxRand{s: splitmix64(x.seed ^ splitmix64(uint64(n)))}
	switch rem := n % nxProportionDenom; {
	case rem < nxPersonProportion:
		return map[string]any{"event_type": "person", "date_time": dt, "person": x.person(n, dt, &r)}, ms
	case rem < nxPersonProportion+nxAuctionProportion:
		return map[string]any{"event_type": "auction", "date_time": dt, "auction": x.auction(n, ms, dt, &r)}, ms
	default:
		return map[string]any{"event_type": "bid", "date_time": dt, "bid": bid(n, dt, &r)}, ms
	}
}

// time is the event time of event n: firstTime + floor(n*1000/rate),
// computed without overflowing n*1000.
func (x *Nexmark) time(n int64) int64 {
	return x.firstTime + n/x.rate*1000 + n%x.rate*1000/x.rate
}

func (x *Nexmark) person(n int64, dt any, r *nxRand) map[string]any {
	name := nxNames[r.intn(int64(len(nxNames)))]
	email := r.str(7) + "@" + r.str(5) + ".com"
	var cc [19]byte
	for g := range 4 {
		v := r.intn(10000)
		for d := 3; d >= 0; d-- {
			cc[g*5+d] = byte('0' + v%10)
			v /= 10
		}
		if g < 3 {
			cc[g*5+4] = ' '
		}
	}
	city := nxCities[r.intn(int64(len(nxCities)))]
	state := nxStates[r.intn(int64(len(nxStates)))]
	size := 8 + len(name) + len(email) + len(cc) + len(city) + len(state)
	return map[string]any{
		"id":            float64(lastPersonID(n) + nxFirstPersonID),
		"name":          name,
		"email_address": email,
		"credit_card":   string(cc[:]),
		"city":          city,
		"state":         state,
		"date_time":     dt,
		"extra":         r.extra(size, nxAvgPersonBytes),
	}
}

func (x *Nexmark) auction(n, ms int64, dt any, r *nxRand) map[string]any {
	var seller int64
	if r.intn(nxHotSellersRatio) > 0 {
		seller = lastPersonID(n) / nxHotGroup * nxHotGroup
	} else {
		seller = nextPersonID(n, r)
	}
	category := nxFirstCategoryID + r.intn(nxNumCategories)
	initial := r.price()
	reserve := initial + r.price()
	// Auctions last long enough for about nxNumInFlightAuctions of them to
	// be open at once.
	horizon := x.time(n+nxNumInFlightAuctions*nxProportionDenom/nxAuctionProportion) - ms
	expires := ms + 1 + r.intn(max(horizon*2, 1))
	item := r.str(20)
	desc := r.str(100)
	size := 8 + len(item) + len(desc) + 8 + 8 + 8 + 8 + 8
	return map[string]any{
		"id":          float64(lastAuctionID(n) + nxFirstAuctionID),
		"item_name":   item,
		"description": desc,
		"initial_bid": float64(initial),
		"reserve":     float64(reserve),
		"date_time":   dt,
		"expires":     float64(expires),
		"seller":      float64(seller + nxFirstPersonID),
		"category":    float64(category),
		"extra":       r.extra(size, nxAvgAuctionBytes),
	}
}

func bid(n int64, dt any, r *nxRand) map[string]any {
	var auction, bidder int64
	if r.intn(nxHotAuctionRatio) > 0 {
		auction = lastAuctionID(n) / nxHotGroup * nxHotGroup
	} else {
		auction = nextAuctionID(n, r)
	}
	if r.intn(nxHotBiddersRatio) > 0 {
		bidder = lastPersonID(n)/nxHotGroup*nxHotGroup + 1
	} else {
		bidder = nextPersonID(n, r)
	}
	price := r.price()
	var channel, url string
	if r.intn(nxHotChannelsRatio) > 0 {
		i := r.intn(int64(len(nxHotChannels)))
		channel, url = nxHotChannels[i], nxHotURLs[i]
	} else {
		i := r.intn(nxChannels)
		channel, url = nxChannelNames[i], nxChannelURLs[i]
	}
	return map[string]any{
		"auction":   float64(auction + nxFirstAuctionID),
		"bidder":    float64(bidder + nxFirstPersonID),
		"price":     float64(price),
		"channel":   channel,
		"url":       url,
		"date_time": dt,
		"extra":     r.extra(8+8+8+8, nxAvgBidBytes),
	}
}

// lastPersonID is the 0-based id of the newest person at event n.
func lastPersonID(n int64) int64 {
	epoch, off := n/nxProportionDenom, n%nxProportionDenom
	if off >= nxPersonProportion {
		off = nxPersonProportion - 1
	}
	return epoch*nxPersonProportion + off
}

// lastAuctionID is the 0-based id of the newest auction at event n (-1
// before the first).
func lastAuctionID(n int64) int64 {
	epoch, off := n/nxProportionDenom, n%nxProportionDenom
	switch {
	case off < nxPersonProportion:
		epoch--
		off = nxAuctionProportion - 1
	case off >= nxPersonProportion+nxAuctionProportion:
		off = nxAuctionProportion - 1
	default:
		off -= nxPersonProportion
	}
	return epoch*nxAuctionProportion + off
}

// nextPersonID picks a 0-based person id among the active people, reaching
// a little past the newest.
func nextPersonID(n int64, r *nxRand) int64 {
	people := lastPersonID(n) + 1
	active := min(people, nxNumActivePeople)
	return people - active + r.intn(active+nxPersonIDLead)
}

// nextAuctionID picks a 0-based auction id among those in flight, reaching
// a little past the newest.
func nextAuctionID(n int64, r *nxRand) int64 {
	last := lastAuctionID(n)
	lo := max(last-nxNumInFlightAuctions, 0)
	return lo + r.intn(last-lo+1+nxAuctionIDLead)
}

// nxRand is a SplitMix64 stream: fast, and good enough for test data.
type nxRand struct{ s uint64 }

func (r *nxRand) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a value in [0, n) for n > 0.
func (r *nxRand) intn(n int64) int64 {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int64(hi)
}

// price is a price in cents, log-uniform between $1 and $1,000,000.
func (r *nxRand) price() int64 {
	f := float64(r.next()>>11) / (1 << 53)
	return int64(math.Round(math.Pow(10, f*6) * 100))
}

// str is a random string of lowercase letters and spaces with a length in
// [3, maxLen). It is a slice of a shared immutable text, so it costs no
// allocation.
func (r *nxRand) str(maxLen int64) string {
	return r.text(nxMinStringLen + r.intn(maxLen-nxMinStringLen))
}

// text is a random string of exactly n bytes.
func (r *nxRand) text(n int64) string {
	off := r.intn(int64(len(nxText)) - n)
	return nxText[off : off+n]
}

// extra pads an event of size bytes to about avg bytes (±20%).
func (r *nxRand) extra(size, avg int) string {
	if size > avg {
		return ""
	}
	avg -= size
	delta := int64(math.Round(float64(avg) * 0.2))
	n := int64(avg) - delta
	if delta > 0 {
		n += r.intn(2 * delta)
	}
	return r.text(n)
}

// Tables shared by every nexmark input, built once from a fixed seed. They
// hold only strings, which consumers cannot modify.
var (
	nexmarkTablesOnce sync.Once
	nxText            string // random lowercase text with spaces
	nxNames           []string
	nxChannelNames    []string
	nxChannelURLs     []string
	nxHotURLs         []string

	nxFirstNames  = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	nxLastNames   = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	nxCities      = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	nxStates      = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	nxHotChannels = []string{"Google", "Facebook", "Baidu", "Apple"}
)

func buildNexmarkTables() {
	r := nxRand{s: 0x6e65786d61726b} // "nexmark"
	var b strings.Builder
	const textLen = 1 << 16
	b.Grow(textLen)
	for range textLen {
		if r.intn(13) == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteByte(byte('a' + r.intn(26)))
		}
	}
	nxText = b.String()
	for _, f := range nxFirstNames {
		for _, l := range nxLastNames {
			nxNames = append(nxNames, f+" "+l)
		}
	}
	baseURL := func() string {
		part := func() string { return strings.ReplaceAll(r.str(5), " ", "_") }
		return "https://www.nexmark.com/" + part() + "/" + part() + "/" + part() + "/item.htm?query=1"
	}
	for range nxHotChannels {
		nxHotURLs = append(nxHotURLs, baseURL())
	}
	nxChannelNames = make([]string, nxChannels)
	nxChannelURLs = make([]string, nxChannels)
	for i := range nxChannels {
		nxChannelNames[i] = "channel-" + strconv.Itoa(i)
		u := baseURL()
		if r.intn(10) == 0 {
			id := []byte(strconv.Itoa(i))
			for a, z := 0, len(id)-1; a < z; a, z = a+1, z-1 {
				id[a], id[z] = id[z], id[a]
			}
			u += "&channel_id=" + string(id)
		}
		nxChannelURLs[i] = u
	}
}
