package ctl

import (
	"bufio"
	"strings"
	"testing"
)

func TestPrintTap(t *testing.T) {
	stream := "retry: 2000\n\n" +
		"event: message\ndata: {\"stage\":\"input\",\"sampled_at\":\"2026-11-28T18:40:01.123Z\",\"payload\":\"{\\\"id\\\": 7}\\n\",\"encoding\":\"text\",\"metadata\":{\"source\":\"orders\",\"authorization\":\"<masked>\"}}\n\n" +
		": keep-alive\n\n" +
		"event: message\ndata: {\"stage\":\"processor:1\",\"sampled_at\":\"2026-11-28T18:40:01.200Z\",\"payload\":\"//4=\",\"encoding\":\"base64\"}\n\n" +
		"event: dropped\ndata: {\"sampled\":2,\"dropped\":5}\n\n" +
		"event: end\ndata: {\"reason\":\"duration\",\"sampled\":2,\"dropped\":5}\n\n" +
		"event: message\ndata: {\"stage\":\"after the end\"}\n\n"
	tests := []struct {
		output, want string
	}{
		{outTable, `2026-11-28T18:40:01.123Z input {\"id\": 7}\n authorization="<masked>" source="orders"
2026-11-28T18:40:01.200Z processor:1 base64://4=
# dropped 5 of 7 samples (reading too slowly)
# end (duration): 2 sampled, 5 dropped
`},
		{outJSON, `{"event":"message","data":{"stage":"input","sampled_at":"2026-11-28T18:40:01.123Z","payload":"{\"id\": 7}\n","encoding":"text","metadata":{"source":"orders","authorization":"<masked>"}}}
{"event":"message","data":{"stage":"processor:1","sampled_at":"2026-11-28T18:40:01.200Z","payload":"//4=","encoding":"base64"}}
{"event":"dropped","data":{"sampled":2,"dropped":5}}
{"event":"end","data":{"reason":"duration","sampled":2,"dropped":5}}
`},
	}
	for _, tt := range tests {
		var out strings.Builder
		if err := printTap(&out, tt.output, bufio.NewReader(strings.NewReader(stream))); err != nil {
			t.Fatal(err)
		}
		if out.String() != tt.want {
			t.Errorf("-o %q:\n%s\nwant:\n%s", tt.output, out.String(), tt.want)
		}
	}
	var out strings.Builder
	if err := printTap(&out, outTable, bufio.NewReader(strings.NewReader("retry: 2000\n\nevent: message\ndata: {}\n\n"))); err == nil {
		t.Error("a tap cut before its end printed no error")
	}
}
