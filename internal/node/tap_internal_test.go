package node

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowplane/flowplane/internal/config"
	"github.com/flowplane/flowplane/internal/tap"
	"github.com/flowplane/flowplane/internal/wire"
)

// TestTapMessageRedacts: metadata under a credential-like key is masked
// whole; a secret value is redacted from the payload and every other
// value, in text and in binary payloads alike.
func TestTapMessageRedacts(t *testing.T) {
	const secret = "s3cr3t-Tap-Value-91f2"
	n := &Node{opts: Options{Secrets: config.NewRedactor(secret)}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	tests := []struct {
		name string
		in   tap.Sample
		want wire.TapMessage
	}{{
		name: "metadata",
		in: tap.Sample{Point: "input", At: at, Payload: []byte(`{"k":"` + secret + `"}`), Meta: map[string]string{
			"Authorization": "Bearer abc", "X-Api-Key": "k", "Set-Cookie": "id=1", "db_password": "p",
			"x-session-id": "s", "trace": "t-" + secret, "source": "kafka",
		}},
		want: wire.TapMessage{Stage: "input", SampledAt: wire.At(at), Payload: `{"k":"[redacted]"}`, Encoding: "text", Metadata: map[string]string{
			"Authorization": "<masked>", "X-Api-Key": "<masked>", "Set-Cookie": "<masked>", "db_password": "<masked>",
			"x-session-id": "<masked>", "trace": "t-[redacted]", "source": "kafka",
		}},
	}, {
		name: "binary",
		in:   tap.Sample{Point: "output", At: at, Payload: append([]byte{0xff, 0xfe}, secret...)},
		want: wire.TapMessage{Stage: "output", SampledAt: wire.At(at), Encoding: "base64",
			Payload: base64.StdEncoding.EncodeToString(append([]byte{0xff, 0xfe}, "[redacted]"...))},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := n.tapMessage(tt.in)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("tapMessage (-want +got):\n%s", d)
			}
			if strings.Contains(got.Payload, secret) {
				t.Error("the payload holds the secret")
			}
		})
	}
}
