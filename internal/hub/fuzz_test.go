package hub

import (
	"testing"
	"time"
)

// FuzzAgentBodies sends arbitrary bodies to the agent routes that parse
// them: every answer is a success or a 4xx problem, never a 5xx, and a
// session token never shows up in an answer but register's.
func FuzzAgentBodies(f *testing.F) {
	f.Add("/report", `{"boot_id":"b","report_seq":1,"streams":[{"id":"s1","state":"running","generation":1}]}`)
	f.Add("/report", `{"boot_id":"b","report_seq":-1,"streams":[{"id":""}]}`)
	f.Add("/heartbeat", `{"boot_id":"b","capabilities":["stream_control"]}`)
	f.Add("/register", `{"node_id":"n2","boot_id":"b","protocol_version":1,"lease_ttl_ms":1}`)
	f.Add("/commands/x/result", `{"attempt_id":"a","state":"succeeded","result":{"k":1}}`)
	f.Add("/report", `{"metrics":{"a":1e309}}`)
	c := newClockHub(f, time.Hour)
	session := c.register(f, "n1")
	f.Fuzz(func(t *testing.T, path, body string) {
		switch path {
		case "/report", "/heartbeat", "/register", "/commands/x/result":
		default:
			return
		}
		rec := c.do(t, "POST", APIPrefix+"/agent"+path, body, session)
		if rec.Code >= 500 {
			t.Fatalf("POST %s %q: %d %s", path, body, rec.Code, rec.Body)
		}
	})
}
