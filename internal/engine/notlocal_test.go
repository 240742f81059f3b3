package engine

import (
	"errors"
	"testing"
)

// TestNotLocal: a bind error is put down to a data_host that is not an
// address of this host only when it is one.
func TestNotLocal(t *testing.T) {
	other := errors.New("some other bind error")
	for _, c := range []struct {
		host string
		want bool
	}{{"127.0.0.1", false}, {"192.0.2.1", true}, {"localhost", false}} {
		if got := notLocal(c.host, other); got != c.want {
			t.Errorf("notLocal(%q) = %v, want %v", c.host, got, c.want)
		}
	}
}
