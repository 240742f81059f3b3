package wire

// CapabilityTap: the Agent runs live taps the Hub hands it (GET
// agent/taps) and pushes their samples (POST agent/taps/{id}/samples).
const CapabilityTap = "tap"

// The server-sent events of a live tap (docs/node-api.md "Live tap"):
// "message" carries a TapMessage, "dropped" a TapCounts every second while
// the count of dropped samples grows, "end" a TapEnd as the last event.
const (
	TapEventMessage = "message"
	TapEventDropped = "dropped"
	TapEventEnd     = "end"
)

// Payload encodings of a TapMessage.
const (
	TapEncodingText   = "text"
	TapEncodingBase64 = "base64"
)

// Reasons a tap ends (TapEnd.Reason).
const (
	TapEndDuration = "duration" // its duration passed
	TapEndNode     = "node"     // the node stopped serving it (shut down, lost the Hub)
	TapEndHub      = "hub"      // the Hub relaying it shut down
)

// TapMessage is one sampled message, secrets redacted: its payload as text
// when it is UTF-8 and in base64 otherwise, and its metadata.
type TapMessage struct {
	// Stage is where it was sampled: input, processor:<i>, output, or a
	// job operator's id.
	Stage     string            `json:"stage"`
	SampledAt Time              `json:"sampled_at"`
	Payload   string            `json:"payload"`
	Encoding  string            `json:"encoding"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

// TapCounts says how many samples a tap took and how many it dropped
// because its reader was slow.
type TapCounts struct {
	Sampled uint64 `json:"sampled"`
	Dropped uint64 `json:"dropped"`
}

// TapEnd is the last event of a tap.
type TapEnd struct {
	Reason string `json:"reason"`
	TapCounts
}

// TapRequest is a tap the Hub hands an Agent: GET agent/taps long-polls
// them. The Agent runs it until DurationMS passed or the Hub answers a
// push with 410.
type TapRequest struct {
	TapID string `json:"tap_id"`
	// Kind is "stream" or "job".
	Kind       string `json:"kind"`
	ResourceID string `json:"resource_id"`
	Stage      string `json:"stage,omitempty"`
	Operator   string `json:"operator,omitempty"`
	Rate       int    `json:"rate"`
	DurationMS int64  `json:"duration_ms"`
}

// TapBatch is what an Agent pushes for a running tap (POST
// agent/taps/{id}/samples): the messages sampled since the last push, the
// counts so far, and End once the tap ended on the node (or Error when it
// could not start).
type TapBatch struct {
	Messages []TapMessage `json:"messages"`
	TapCounts
	End   *TapEnd  `json:"end,omitempty"`
	Error *Problem `json:"error,omitempty"`
}
