package ctl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flowplane/flowplane/internal/wire"
)

// tapEvent is one event of a tap as -o json writes it: one JSON object a
// line.
type tapEvent struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

func (a *app) tapCommand() *cobra.Command {
	var stage, operator, rate, duration string
	c := &cobra.Command{
		Use:   "tap nodes/<node>/streams/<id> | nodes/<node>/jobs/<id>",
		Short: "Show a running stream's or job's messages live, sampled, secrets redacted",
		Long: `tap opens a live tap through the Hub: copies of the messages after one stage
of a stream (--stage input, processor:<i> or output; default after the last
processor) or after one operator of a job (--operator; default its first
sink), at most --rate a second (default 10, at most 1000) for --duration
(default 60s, at most 1h). It prints a line per message: the time it was
sampled, the stage and the payload (base64 when it is not text), then its
metadata. A line starting with "#" says how many samples were dropped
because the output was read too slowly, and how the tap ended. -o json
prints every event as one JSON object a line. It needs the tap permission
(the operator role); every tap is audited.`,
		Example: `  flowplane ctl tap nodes/node-a/streams/orders
  flowplane ctl tap nodes/node-a/streams/orders --stage input --rate 100 --duration 5m
  flowplane ctl tap nodes/node-a/jobs/clicks --operator window -o json`,
		Args: exactArgs(1, "one resource: nodes/<node>/streams/<id> or nodes/<node>/jobs/<id>"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.output != outTable && a.output != outJSON {
				return usagef("-o %q: want json (or nothing for lines)", a.output)
			}
			parts := strings.Split(args[0], "/")
			if len(parts) != 4 || parts[0] != "nodes" || parts[1] == "" || parts[3] == "" || (parts[2] != "streams" && parts[2] != "jobs") {
				return usagef("%q: want nodes/<node>/streams/<id> or nodes/<node>/jobs/<id>", args[0])
			}
			q := url.Values{}
			switch {
			case parts[2] == "streams" && operator != "":
				return usagef("--operator is for jobs; a stream takes --stage")
			case parts[2] == "jobs" && stage != "":
				return usagef("--stage is for streams; a job takes --operator")
			}
			for k, v := range map[string]string{"stage": stage, "operator": operator, "rate": rate, "duration": duration} {
				if v != "" {
					q.Set(k, v)
				}
			}
			cl, err := a.client()
			if err != nil {
				return err
			}
			path := "/nodes/" + url.PathEscape(parts[1]) + "/" + parts[2] + "/" + url.PathEscape(parts[3]) + "/tap"
			resp, err := cl.sendStream(cmd.Context(), request{method: http.MethodGet, path: path, query: q}, live)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
				return cl.problem(resp.StatusCode, b)
			}
			return printTap(a.env.Stdout, a.output, bufio.NewReader(resp.Body))
		},
	}
	f := c.Flags()
	f.StringVar(&stage, "stage", "", "streams: input, processor:<i> or output (default: after the last processor)")
	f.StringVar(&operator, "operator", "", "jobs: the operator id (default: the job's first sink)")
	f.StringVar(&rate, "rate", "", "messages a second, 1 to 1000 (default 10)")
	f.StringVar(&duration, "duration", "", "how long, e.g. 90s or 5m, at most 1h (default 60s)")
	return c
}

// printTap writes the events of a tap until its end.
func printTap(w io.Writer, output string, r *bufio.Reader) error {
	var werr error
	ended := false
	err := readSSE(r, func(b sseBlock) bool {
		if b.kind == "" {
			return true
		}
		if output == outJSON {
			enc := json.NewEncoder(w)
			enc.SetEscapeHTML(false)
			werr = enc.Encode(tapEvent{Event: b.kind, Data: json.RawMessage(b.data)})
		} else {
			werr = printTapLine(w, b)
		}
		ended = b.kind == wire.TapEventEnd
		return werr == nil && !ended
	})
	if werr != nil {
		return werr
	}
	if ended {
		return nil
	}
	return fmt.Errorf("the tap ended early: %w", err)
}

func printTapLine(w io.Writer, b sseBlock) error {
	switch b.kind {
	case wire.TapEventMessage:
		var m wire.TapMessage
		if err := json.Unmarshal([]byte(b.data), &m); err != nil {
			return fmt.Errorf("a tap message: %w", err)
		}
		payload := m.Payload
		if m.Encoding == wire.TapEncodingBase64 {
			payload = "base64:" + payload
		} else {
			payload = strconv.Quote(payload)
			payload = payload[1 : len(payload)-1] // one line, escapes visible
		}
		line := m.SampledAt.UTC().Format(wire.TimeLayout) + " " + m.Stage + " " + payload
		if len(m.Metadata) > 0 {
			keys := make([]string, 0, len(m.Metadata))
			for k := range m.Metadata {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				line += " " + k + "=" + strconv.Quote(m.Metadata[k])
			}
		}
		_, err := fmt.Fprintln(w, line)
		return err
	case wire.TapEventDropped:
		var c wire.TapCounts
		if err := json.Unmarshal([]byte(b.data), &c); err != nil {
			return fmt.Errorf("a tap count: %w", err)
		}
		_, err := fmt.Fprintf(w, "# dropped %d of %d samples (reading too slowly)\n", c.Dropped, c.Dropped+c.Sampled)
		return err
	case wire.TapEventEnd:
		var e wire.TapEnd
		if err := json.Unmarshal([]byte(b.data), &e); err != nil {
			return fmt.Errorf("a tap end: %w", err)
		}
		_, err := fmt.Fprintf(w, "# end (%s): %d sampled, %d dropped\n", e.Reason, e.Sampled, e.Dropped)
		return err
	}
	return nil
}
