package tap

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The bounds of a tap request (docs/node-api.md "Live tap").
const (
	DefaultRate     = 10
	MaxRate         = 1000
	DefaultDuration = time.Minute
	MaxDuration     = time.Hour
)

// Stream points: after the input, after processor i ("processor:<i>", its
// index in the configuration's processors), after the output accepted.
const (
	PointInput  = "input"
	PointOutput = "output"
	pointProc   = "processor:"
)

// ProcessorPoint names the point after the configured processor i.
func ProcessorPoint(i int) string { return pointProc + strconv.Itoa(i) }

// Params is a tap request: where (Stage for a stream, Operator for a job;
// empty takes the default), how many messages a second and how long.
type Params struct {
	Stage    string
	Operator string
	Rate     int
	Duration time.Duration
}

// ParamError is a query parameter of a tap request out of its bounds.
type ParamError struct {
	Param  string
	Reason string
}

func (e *ParamError) Error() string { return e.Param + ": " + e.Reason }

// ParseParams reads a tap request from its query: stage (streams) or
// operator (jobs), rate (messages a second, 1 to MaxRate, default
// DefaultRate) and duration (a Go duration such as "90s" or "5m", or whole
// seconds; above 0, at most MaxDuration, default DefaultDuration). A
// parameter given twice, or one of the other kind, is an error.
func ParseParams(q url.Values, job bool) (Params, error) {
	p := Params{Rate: DefaultRate, Duration: DefaultDuration}
	where, other := "stage", "operator"
	if job {
		where, other = other, where
	}
	if _, ok := q[other]; ok {
		return p, &ParamError{Param: other, Reason: "is not a parameter of this tap; use " + where}
	}
	one := func(name string) (string, bool, error) {
		vs, ok := q[name]
		if !ok {
			return "", false, nil
		}
		if len(vs) != 1 {
			return "", false, &ParamError{Param: name, Reason: "must be given once"}
		}
		return vs[0], true, nil
	}
	v, ok, err := one(where)
	if err != nil {
		return p, err
	}
	if ok {
		if v == "" || len(v) > 256 || strings.ContainsAny(v, "\x00\r\n") {
			return p, &ParamError{Param: where, Reason: "must be a non-empty name of at most 256 bytes"}
		}
		if job {
			p.Operator = v
		} else if _, err := parseStage(v); err != nil {
			return p, err
		} else {
			p.Stage = v
		}
	}
	if v, ok, err := one("rate"); err != nil {
		return p, err
	} else if ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxRate {
			return p, &ParamError{Param: "rate", Reason: fmt.Sprintf("must be a whole number of messages a second from 1 to %d", MaxRate)}
		}
		p.Rate = n
	}
	if v, ok, err := one("duration"); err != nil {
		return p, err
	} else if ok {
		d, err := parseDuration(v)
		if err != nil || d <= 0 || d > MaxDuration {
			return p, &ParamError{Param: "duration", Reason: "must be a duration above 0 and at most 1h, such as 90s or 5m (or whole seconds)"}
		}
		p.Duration = d
	}
	return p, nil
}

func parseDuration(v string) (time.Duration, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > int64(MaxDuration/time.Second) {
			return 0, fmt.Errorf("out of range")
		}
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(v)
}

// parseStage returns the processor index of a stage, -1 for input and -2
// for output.
func parseStage(v string) (int, error) {
	switch v {
	case PointInput:
		return -1, nil
	case PointOutput:
		return -2, nil
	}
	if rest, ok := strings.CutPrefix(v, pointProc); ok {
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 && strconv.Itoa(i) == rest {
			return i, nil
		}
	}
	return 0, &ParamError{Param: "stage", Reason: "must be input, output or processor:<i> (the processor's index in the configuration)"}
}

// StreamPoint resolves a stream's stage against its number of processors:
// the empty stage is after the last processor (the input without any).
func StreamPoint(stage string, processors int) (string, error) {
	if stage == "" {
		if processors == 0 {
			return PointInput, nil
		}
		return ProcessorPoint(processors - 1), nil
	}
	i, err := parseStage(stage)
	if err != nil {
		return "", err
	}
	if i >= processors && processors == 0 {
		return "", &ParamError{Param: "stage", Reason: "the stream has no processors: input or output"}
	}
	if i >= processors {
		return "", &ParamError{Param: "stage", Reason: fmt.Sprintf("the stream has %d processors: processor:0 to processor:%d", processors, processors-1)}
	}
	return stage, nil
}

// QueryDoc describes the query parameters of a tap route (stage for a
// stream's, operator for a job's), for the API documents of the node and
// the Hub alike.
var QueryDoc = map[string]string{
	"stage":    "input, processor:<i> or output; default after the last processor.",
	"operator": "An operator id of the job; default its first sink.",
	"rate":     fmt.Sprintf("Messages a second, 1 to %d; default %d.", MaxRate, DefaultRate),
	"duration": "How long: a duration such as 90s or 5m, or whole seconds; at most 1h, default 60s.",
}
