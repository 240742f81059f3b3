package eventlog

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/flowplane/flowplane/internal/wire"
)

// BenchmarkAppend measures Append into a full log, with subscribers that
// read every event as it comes.
func BenchmarkAppend(b *testing.B) {
	for _, subs := range []int{0, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			l := New(Options{})
			appendN(l, DefaultCapacity, wire.EventStreamStateChanged)
			ctx, cancel := context.WithCancel(b.Context())
			var wg sync.WaitGroup
			for range subs {
				s := l.Subscribe(ctx, Live, Filter{})
				wg.Go(func() {
					for {
						if _, err := s.Next(ctx); err != nil {
							return
						}
					}
				})
			}
			ev := wire.Event{Kind: wire.EventStreamStateChanged, ResourceID: "s1", Data: map[string]any{"state": "running"}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				l.Append(ev)
			}
			b.StopTimer()
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkQuery measures one page of a full log, unfiltered and with a
// filter that matches one event in four.
func BenchmarkQuery(b *testing.B) {
	l := New(Options{})
	kinds := []string{wire.EventIntentAccepted, wire.EventCommandSucceeded, wire.EventStreamStateChanged, wire.EventConfigurationApplied}
	for i := range DefaultCapacity {
		l.Append(wire.Event{Kind: kinds[i%len(kinds)], ResourceID: fmt.Sprintf("s%d", i%10)})
	}
	for _, bc := range []struct {
		name string
		f    Filter
	}{
		{"all", Filter{}},
		{"kind", Filter{Kinds: []string{wire.EventIntentAccepted}}},
		{"kind+resource", Filter{Kinds: []string{wire.EventIntentAccepted}, ResourceID: "s4"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p := l.Query(bc.f, 2, 50); p.Total == 0 {
					b.Fatal("no match")
				}
			}
		})
	}
}
