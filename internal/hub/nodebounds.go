package hub

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/flowplane/flowplane/internal/httpapi"
	"github.com/flowplane/flowplane/internal/hub/store"
	"github.com/flowplane/flowplane/internal/wire"
)

// Bounds of what the Hub keeps from one node (docs/node-identity.md
// "Admission and bounds"). A body beyond them is refused whole with 422
// validation_failed naming the field, never partly stored; last_error and
// failure messages are cut instead, as before.
const (
	// maxCapabilities bounds the capabilities a node advertises: the
	// component set (about 80 today) with room to grow.
	maxCapabilities = 256
	// maxFieldLen bounds every other string a node sends: versions, boot
	// ids, action ids, data addresses.
	maxFieldLen = 255
	// maxStateLen bounds a stream's or job's reported state.
	maxStateLen = 32
	// maxErrorLen is where a reported last_error or failure message is cut.
	maxErrorLen = 1024
	// maxMetricNameLen bounds the name of a metric a node reports.
	maxMetricNameLen = 128
)

// capabilityRE is the shape of a capability: a word (stream_control) or a
// component (input:kafka).
var capabilityRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)

// metricNameRE is Prometheus' metric name pattern: a node's metric names
// become label values of svc_node_reported behind the operator token.
var metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// capabilityProblems checks advertised capabilities.
func capabilityProblems(caps []string) []httpapi.FieldProblem {
	if len(caps) > maxCapabilities {
		return []httpapi.FieldProblem{{Path: "capabilities", Message: fmt.Sprintf("at most %d", maxCapabilities)}}
	}
	for i, c := range caps {
		if !capabilityRE.MatchString(c) {
			return []httpapi.FieldProblem{{Path: "capabilities[" + strconv.Itoa(i) + "]",
				Message: "1 to 128 letters, digits, '.', '_', ':', '/' or '-', starting with a letter or digit"}}
		}
	}
	return nil
}

// fieldProblem checks that a string field is at most n bytes.
func fieldProblem(path, v string, n int) []httpapi.FieldProblem {
	if len(v) <= n {
		return nil
	}
	return []httpapi.FieldProblem{{Path: path, Message: fmt.Sprintf("at most %d bytes", n)}}
}

// registerBounds checks the strings of a registration or heartbeat.
func registerBounds(version, dataAddress string, caps []string) []httpapi.FieldProblem {
	probs := capabilityProblems(caps)
	probs = append(probs, fieldProblem("version", version, maxFieldLen)...)
	return append(probs, fieldProblem("data_address", dataAddress, maxFieldLen)...)
}

// reportProblems checks a report against the bounds; the first problem
// found is enough to refuse it.
func reportProblems(req wire.Report) []httpapi.FieldProblem {
	if len(req.Streams) > store.MaxReportStreams {
		return []httpapi.FieldProblem{{Path: "streams", Message: fmt.Sprintf("at most %d streams", store.MaxReportStreams)}}
	}
	if len(req.Metrics) > store.MaxReportMetrics {
		return []httpapi.FieldProblem{{Path: "metrics", Message: fmt.Sprintf("at most %d metrics", store.MaxReportMetrics)}}
	}
	probs := fieldProblem("boot_id", req.BootID, maxFieldLen)
	probs = append(probs, fieldProblem("configuration_version", req.ConfigurationVersion, maxFieldLen)...)
	if c := req.Configuration; c != nil {
		probs = append(probs, fieldProblem("configuration.node_version", c.NodeVersion, maxFieldLen)...)
		probs = append(probs, fieldProblem("configuration.hub_version", c.HubVersion, maxFieldLen)...)
	}
	for k := range req.Metrics {
		if len(k) > maxMetricNameLen || !metricNameRE.MatchString(k) {
			probs = append(probs, httpapi.FieldProblem{Path: "metrics",
				Message: fmt.Sprintf("names match %s and have at most %d bytes", metricNameRE, maxMetricNameLen)})
			break
		}
	}
	for i, s := range req.Streams {
		if len(probs) > 0 {
			return probs
		}
		p := "streams[" + strconv.Itoa(i) + "]"
		if !wire.ValidID(s.ID) {
			probs = append(probs, httpapi.FieldProblem{Path: p + ".id", Message: idMessage})
		}
		probs = append(probs, fieldProblem(p+".state", s.State, maxStateLen)...)
		probs = append(probs, fieldProblem(p+".config_version", s.ConfigVersion, maxFieldLen)...)
		probs = append(probs, fieldProblem(p+".action_id", s.ActionID, maxFieldLen)...)
	}
	return probs
}

// jobObservationProblems checks the strings of one job observation.
func jobObservationProblems(path string, o wire.JobObservation) []httpapi.FieldProblem {
	probs := fieldProblem(path+".state", o.State, maxStateLen)
	probs = append(probs, fieldProblem(path+".action_id", o.ActionID, maxFieldLen)...)
	return append(probs, fieldProblem(path+".restored_from", o.RestoredFrom, maxFieldLen)...)
}
