package reconcile

import (
	"testing"
	"time"
)

func TestLeadership(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl, margin = 5 * time.Second, time.Second
	base := LeaderInput{Self: "a", Now: now, TTL: ttl, Margin: margin}
	with := func(f func(*LeaderInput)) LeaderInput { in := base; f(&in); return in }
	tests := []struct {
		name string
		in   LeaderInput
		want string
	}{
		{"renewed its term", with(func(in *LeaderInput) {
			in.Claimed, in.Holder, in.Epoch, in.Leading, in.LeadingEpoch = true, "a", 3, true, 3
		}), LeadKeep},
		{"acquired while standing by", with(func(in *LeaderInput) { in.Claimed, in.Holder, in.Epoch = true, "a", 4 }), LeadGain},
		{"acquired a new term while leading an old one", with(func(in *LeaderInput) {
			in.Claimed, in.Holder, in.Epoch, in.Leading, in.LeadingEpoch = true, "a", 5, true, 3
		}), LeadGain},
		{"another holds it, leading: deposed", with(func(in *LeaderInput) {
			in.Claimed, in.Holder, in.Epoch, in.Leading, in.LeadingEpoch = true, "b", 4, true, 3
		}), LeadStepDown},
		{"another holds it", with(func(in *LeaderInput) { in.Claimed, in.Holder, in.Epoch = true, "b", 4 }), LeadStandBy},
		{"store failed, renewed recently", with(func(in *LeaderInput) {
			in.Leading, in.LeadingEpoch, in.LastRenewal = true, 3, now.Add(-3*time.Second)
		}), LeadKeep},
		{"store failed, just before ttl-margin", with(func(in *LeaderInput) {
			in.Leading, in.LeadingEpoch, in.LastRenewal = true, 3, now.Add(-(ttl-margin)+time.Millisecond)
		}), LeadKeep},
		{"store failed, at ttl-margin: steps down before the lease lapses", with(func(in *LeaderInput) {
			in.Leading, in.LeadingEpoch, in.LastRenewal = true, 3, now.Add(-(ttl - margin))
		}), LeadStepDown},
		{"store failed, past ttl", with(func(in *LeaderInput) {
			in.Leading, in.LeadingEpoch, in.LastRenewal = true, 3, now.Add(-time.Minute)
		}), LeadStepDown},
		{"store failed, standing by", base, LeadStandBy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Leadership(tt.in); got != tt.want {
				t.Errorf("Leadership = %s, want %s", got, tt.want)
			}
		})
	}
}
