#!/usr/bin/env bash
# Captures the "Examples" part of docs/hub-api.md from a real Hub.
#
#   bash docs/tools/capture-hub-api-examples.sh > /tmp/ex.md     # print it
#   bash docs/tools/capture-hub-api-examples.sh --write          # replace it in docs/hub-api.md
#
# Self-contained: builds the binary, starts `flowplane hub` on 127.0.0.1 with
# a free port, a temporary SQLite file and demo tokens, and plays a fake
# Agent with curl (register with the node token, report, long-poll commands,
# acknowledge, succeed, report again). Needs go, curl and python3. Takes
# about 40 s (redelivery and retry backoff are waited for, not faked).
#
# The doc shows $HUB, $SVC_OPERATOR_TOKEN, $SVC_NODE_TOKEN and $SESSION
# instead of the values; session tokens in bodies are shown as fps_…, and
# the run fails if a token value appears in the output.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
write=0
[ "${1:-}" = "--write" ] && write=1
work=$(mktemp -d)
hubpid=""
stop_hub() {
	if [ -n "$hubpid" ]; then
		kill -TERM "$hubpid" 2>/dev/null
		wait "$hubpid" 2>/dev/null
		hubpid=""
	fi
}
trap 'stop_hub; rm -rf "$work"' EXIT
go build -C "$repo" -o "$work/flowplane" ./cmd/flowplane || exit 1
cd "$work"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
HUB=http://127.0.0.1:$port
OPTOK=op-demo-token-0123456789
NODETOK=node-demo-token-0123456789
export SVC_HUB_ADDRESS=127.0.0.1:$port SVC_HUB_STORAGE=$work/hub.db SVC_OPERATOR_TOKEN=$OPTOK SVC_NODE_TOKEN=$NODETOK
unset SVC_HUB_INSECURE_LOCAL SVC_HUB_API_PREFIX SVC_HUB_CORS_ORIGINS SVC_HUB_INTENT_TTL

start_hub() {
	./flowplane hub >> hub.log 2>&1 &
	hubpid=$!
	for _ in $(seq 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$HUB/readiness")" = 200 ] && return 0
		sleep 0.05
	done
	echo "the Hub did not become ready:" >&2
	cat hub.log >&2
	exit 1
}

out=$work/examples.md
exec 3>&1 1>"$out"

# jget FILE EXPR: a value from a JSON file, EXPR a Python expression on j.
jget() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# Display quoting for the curl command line shown in the doc.
q() {
	case "$1" in
	*[!A-Za-z0-9_./:=?\&,-]*) printf "'%s'" "$1" ;;
	*) printf '%s' "$1" ;;
	esac
}

# call AUTH METHOD PATH [curl args...]: runs the request, leaves the status
# in $status, the headers in hdr and the body in body. AUTH: op, node, sess
# (the current session), none, or raw:<token>.
call() {
	local auth=$1 method=$2 path=$3
	shift 3
	# Every mutation carries a JSON Content-Type, bodiless ones too (415).
	if [ "$method" != GET ] && [[ "$*" != *Content-Type* ]]; then set -- -H 'Content-Type: application/json' "$@"; fi
	local a=()
	case "$auth" in
	op) a=(-H "Authorization: Bearer $OPTOK") ;;
	node) a=(-H "Authorization: Bearer $NODETOK") ;;
	sess) a=(-H "Authorization: Bearer $SESSION") ;;
	raw:*) a=(-H "Authorization: Bearer ${auth#raw:}") ;;
	esac
	status=$(curl -s -X "$method" "${a[@]}" "$@" -D hdr -o body -w '%{http_code}' "$HUB$path")
}

# show TITLE LINES AUTH METHOD PATH [curl args...]: a captured example. The
# status line, the interesting headers and the body (pretty, at most LINES
# lines; 0 = all).
show() {
	local title=$1 lines=$2 auth=$3 method=$4 path=$5
	shift 5
	if [ "$method" != GET ] && [[ "$*" != *Content-Type* ]]; then set -- -H 'Content-Type: application/json' "$@"; fi
	call "$auth" "$method" "$path" "$@"
	echo "#### $title"
	echo
	echo '```'
	local cmd="\$ curl -s"
	[ "$method" != GET ] && cmd="$cmd -X $method"
	case "$auth" in
	op) cmd="$cmd -H \"Authorization: Bearer \$SVC_OPERATOR_TOKEN\"" ;;
	node) cmd="$cmd -H \"Authorization: Bearer \$SVC_NODE_TOKEN\"" ;;
	sess) cmd="$cmd -H \"Authorization: Bearer \$SESSION\"" ;;
	raw:*) cmd="$cmd -H \"Authorization: Bearer ${SHOWTOK:-...}\"" ;;
	esac
	local x
	for x in "$@"; do cmd="$cmd $(q "$x")"; done
	echo "$cmd \"\$HUB$path\""
	tr -d '\r' < hdr | head -1
	tr -d '\r' < hdr | grep -iE '^(etag|location|allow|www-authenticate|idempotent-replayed|retry-after|content-type: text)' |
		sed -E 's/^etag/ETag/I; s/^location/Location/I; s/^allow/Allow/I; s/^www-authenticate/WWW-Authenticate/I; s/^idempotent-replayed/Idempotent-Replayed/I; s/^retry-after/Retry-After/I; s/^content-type/Content-Type/I'
	if [ -s body ]; then
		echo
		if python3 -m json.tool --indent 2 body > pretty 2>/dev/null; then :; else cp body pretty; fi
		if [ "$lines" -gt 0 ] && [ "$(wc -l < pretty)" -gt "$lines" ]; then
			head -"$lines" pretty
			echo "..."
		else
			cat pretty
		fi
	fi
	echo '```'
	echo
}

note() { printf '%s\n\n' "$*"; }

# The fake Agent: one node, its boot, its session and its report sequence.
NODE=node-a
BOOT=boot-1
SEQ=0
SESSION=""
register_body() { printf '{"node_id":"%s","boot_id":"%s","version":"0.6.0-dev","protocol_version":1,"capabilities":["stream_control","job_control","input:generate","output:drop"]}' "$1" "$2"; }
# What the fake Agent reports: stream id -> its observation (JSON).
declare -A OBS=()
observed() {
	local IFS=,
	local all=("${OBS[@]}")
	printf '[%s]' "${all[*]}"
}
# report [METRICS_JSON]: posts the next report of every observed stream.
report() {
	local metrics=${1:-'{"streams_running":1,"messages_received_total":1200}'}
	SEQ=$((SEQ + 1))
	call sess POST /api/v1/agent/report -H 'Content-Type: application/json' \
		-d "{\"boot_id\":\"$BOOT\",\"report_seq\":$SEQ,\"streams\":$(observed),\"configuration_version\":\"v1\",\"metrics\":$metrics}"
	[ "$status" = 204 ] || { echo "report: $status $(cat body)" >&2; exit 1; }
}
heartbeat() { call sess POST /api/v1/agent/heartbeat -H 'Content-Type: application/json' -d "{\"boot_id\":\"$BOOT\",\"capabilities\":[\"stream_control\",\"job_control\",\"input:generate\",\"output:drop\"]}"; }
# poll WAIT_MS: long-polls quietly; the commands are left in cmds.json.
poll() {
	call sess GET "/api/v1/agent/commands?wait_ms=$1"
	cp body cmds.json
}
# result CMD_ID ATTEMPT_ID STATE [FAILURE_JSON]: posts a result quietly.
result() {
	local f=""
	[ -n "${4:-}" ] && f=",\"failure\":$4"
	call sess POST "/api/v1/agent/commands/$1/result" -H 'Content-Type: application/json' -d "{\"attempt_id\":\"$2\",\"state\":\"$3\"$f}"
}
# execute: acknowledges and succeeds the first polled command, then
# reports the stream as the command asked (state, generation, action_id).
execute() {
	local id at res gen st act
	id=$(jget cmds.json 'j["items"][0]["command_id"]')
	at=$(jget cmds.json 'j["items"][0]["attempt_id"]')
	res=$(jget cmds.json 'j["items"][0]["resource_id"]')
	gen=$(jget cmds.json 'j["items"][0]["generation"]')
	st=$(jget cmds.json 'j["items"][0]["payload"]["state"]')
	act=$(jget cmds.json 'j["items"][0].get("action_id", "")')
	result "$id" "$at" acknowledged
	result "$id" "$at" succeeded
	OBS[$res]="{\"id\":\"$res\",\"state\":\"$st\",\"generation\":$gen,\"config_version\":\"v1\",\"action_id\":\"$act\"}"
	report
}

start_hub

echo "Captured from a real Hub by \`docs/tools/capture-hub-api-examples.sh\` (durable"
echo "SQLite storage, demo tokens, one fake Agent played with curl). \`\$HUB\` is"
echo "\`http://127.0.0.1:<port>\`; \`\$SESSION\` is the session token the last"
echo "\`register\` returned. Ids and times differ from run to run."
echo

echo "### Probes and the system descriptor"
echo
show '`GET /liveness`' 0 none GET /liveness
show '`GET /readiness`' 0 none GET /readiness
show '`GET /health`' 0 none GET /health
show '`GET /api/v1/system`' 0 op GET /api/v1/system
show '`GET /api/v1/system` — without a token: 401' 0 none GET /api/v1/system

echo "### The Agent joins"
echo
show '`POST /api/v1/agent/register`' 0 node POST /api/v1/agent/register -H 'Content-Type: application/json' -d "$(register_body $NODE $BOOT)"
SESSION=$(jget body 'j["session_token"]')
SESSIONS=("$SESSION")
SHOWTOK='$SVC_OPERATOR_TOKEN'
show '`POST /api/v1/agent/register` — with the operator token: 401' 0 "raw:$OPTOK" POST /api/v1/agent/register -H 'Content-Type: application/json' -d "$(register_body $NODE $BOOT)"
show '`POST /api/v1/agent/register` — with an invalid body: 422' 0 node POST /api/v1/agent/register -H 'Content-Type: application/json' -d '{"node_id":"","boot_id":"b","protocol_version":2,"capabilities":[]}'
show '`POST /api/v1/agent/heartbeat`' 0 sess POST /api/v1/agent/heartbeat -H 'Content-Type: application/json' -d "{\"boot_id\":\"$BOOT\",\"capabilities\":[\"stream_control\",\"job_control\",\"input:generate\",\"output:drop\"]}"
SEQ=1
show '`POST /api/v1/agent/report`' 0 sess POST /api/v1/agent/report -H 'Content-Type: application/json' -d "{\"boot_id\":\"$BOOT\",\"report_seq\":1,\"streams\":[{\"id\":\"orders\",\"state\":\"stopped\",\"generation\":0,\"config_version\":\"v1\"}],\"configuration_version\":\"v1\",\"metrics\":{\"streams_running\":0}}"
OBS[orders]='{"id":"orders","state":"stopped","generation":0,"config_version":"v1"}'
note "A report that is not newer than the last one (same \`boot_id\`, \`report_seq\` not greater) is ignored and answered 204 all the same:"
show '`POST /api/v1/agent/report` — stale: ignored' 0 sess POST /api/v1/agent/report -H 'Content-Type: application/json' -d "{\"boot_id\":\"$BOOT\",\"report_seq\":1,\"streams\":[],\"configuration_version\":\"v1\"}"
show '`POST /api/v1/agent/job-observations`' 0 sess POST /api/v1/agent/job-observations -H 'Content-Type: application/json' -d '{"jobs":[]}'
show '`GET /api/v1/nodes`' 0 op GET /api/v1/nodes
show '`GET /api/v1/streams` — a reported stream nobody desired yet' 0 op GET /api/v1/streams

echo "### A desired-state write converges"
echo
show '`PUT /api/v1/nodes/node-a/streams/orders/desired-state`' 0 op PUT /api/v1/nodes/node-a/streams/orders/desired-state -H 'Content-Type: application/json' -H 'X-Correlation-ID: demo-1' -d '{"state":"running","config_version":"v1"}'
OP1=$(jget body 'j["operation_id"]')
show '`GET /api/v1/agent/commands?wait_ms=5000`' 0 sess GET '/api/v1/agent/commands?wait_ms=5000'
cp body cmds.json
C1=$(jget cmds.json 'j["items"][0]["command_id"]')
A1=$(jget cmds.json 'j["items"][0]["attempt_id"]')
show '`POST /api/v1/agent/commands/{id}/result` — acknowledged' 0 sess POST "/api/v1/agent/commands/$C1/result" -H 'Content-Type: application/json' -d "{\"attempt_id\":\"$A1\",\"state\":\"acknowledged\"}"
note "Acknowledgement is transport state: the stream is still \`applying\`."
show '`GET /api/v1/nodes/node-a/streams/orders` — acknowledged' 0 op GET /api/v1/nodes/node-a/streams/orders
show '`POST /api/v1/agent/commands/{id}/result` — succeeded' 0 sess POST "/api/v1/agent/commands/$C1/result" -H 'Content-Type: application/json' -d "{\"attempt_id\":\"$A1\",\"state\":\"succeeded\"}"
show '`POST /api/v1/agent/commands/{id}/result` — again: 409' 0 sess POST "/api/v1/agent/commands/$C1/result" -H 'Content-Type: application/json' -d "{\"attempt_id\":\"$A1\",\"state\":\"succeeded\"}"
note "Success alone does not converge either: only a report does."
SEQ=2
show '`POST /api/v1/agent/report` — the stream runs generation 1' 0 sess POST /api/v1/agent/report -H 'Content-Type: application/json' -d "{\"boot_id\":\"$BOOT\",\"report_seq\":2,\"streams\":[{\"id\":\"orders\",\"state\":\"running\",\"generation\":1,\"config_version\":\"v1\"}],\"configuration_version\":\"v1\",\"metrics\":{\"streams_running\":1,\"messages_received_total\":1200}}"
OBS[orders]='{"id":"orders","state":"running","generation":1,"config_version":"v1"}'
show '`GET /api/v1/nodes/node-a/streams/orders`' 0 op GET /api/v1/nodes/node-a/streams/orders
sleep 0.3
show '`GET /api/v1/operations?correlation_id=demo-1`' 0 op GET '/api/v1/operations?correlation_id=demo-1'
show '`GET /api/v1/operations/{id}`' 0 op GET "/api/v1/operations/$OP1"
show '`GET /api/v1/events?operation_id={id}`' 0 op GET "/api/v1/events?operation_id=$OP1&page_size=20"

echo "### Restart, live on the event stream"
echo
note "A subscriber started before the restart sees the operation's whole life (\`curl -N --max-time 4\`, so curl ends by itself):"
heartbeat
curl -s -N --max-time 4 -H "Authorization: Bearer $OPTOK" "$HUB/api/v1/events/stream?resource_id=orders" > sse.txt &
ssepid=$!
sleep 0.3
show '`POST /api/v1/nodes/node-a/streams/orders/actions/restart`' 0 op POST /api/v1/nodes/node-a/streams/orders/actions/restart -H 'X-Correlation-ID: demo-2'
show '`GET /api/v1/agent/commands?wait_ms=5000` — a restart carries its action_id' 0 sess GET '/api/v1/agent/commands?wait_ms=5000'
cp body cmds.json
execute
wait "$ssepid"
echo '#### `GET /api/v1/events/stream?resource_id=orders`'
echo
echo '```'
echo '$ curl -s -N --max-time 4 -H "Authorization: Bearer $SVC_OPERATOR_TOKEN" "$HUB/api/v1/events/stream?resource_id=orders"'
cat sse.txt
echo '```'
echo
LASTID=$(grep '^id: ' sse.txt | sed -n 2p | cut -d' ' -f2)
note "Reconnecting with \`Last-Event-ID\` replays what came after that id, here filtered to one kind:"
show "\`GET /api/v1/events/stream?kind=convergence_changed\` — with \`Last-Event-ID: $LASTID\`" 0 op GET '/api/v1/events/stream?kind=convergence_changed' -N --max-time 2 -H "Last-Event-ID: $LASTID"
show '`GET /api/v1/events/stream` — with a malformed Last-Event-ID: 400' 0 op GET /api/v1/events/stream -N --max-time 2 -H 'Last-Event-ID: yesterday'

echo "### Actions, the legacy adapter and conditional writes"
echo
heartbeat
show '`POST /api/v1/nodes/node-a/streams/orders/stop`' 0 op POST /api/v1/nodes/node-a/streams/orders/stop
poll 5000
execute
show '`POST /api/v1/streams/orders/start` — legacy: the one node hosting it' 0 op POST /api/v1/streams/orders/start
poll 5000
execute
show '`PUT /api/v1/nodes/node-a/streams/orders/desired-state` — stale `If-Match`: 412' 0 op PUT /api/v1/nodes/node-a/streams/orders/desired-state -H 'Content-Type: application/json' -H 'If-Match: "generation-1"' -d '{"state":"stopped","config_version":"v1"}'
show '`PUT /api/v1/nodes/node-a/streams/orders/desired-state` — invalid state: 422' 0 op PUT /api/v1/nodes/node-a/streams/orders/desired-state -H 'Content-Type: application/json' -d '{"state":"paused"}'
show '`PUT /api/v1/nodes/node-a/streams/orders/desired-state` — unknown field: 400' 0 op PUT /api/v1/nodes/node-a/streams/orders/desired-state -H 'Content-Type: application/json' -d '{"state":"running","replicas":2}'
show '`PUT /api/v1/nodes/node-a/streams/billing/desired-state` — with `Idempotency-Key`' 0 op PUT /api/v1/nodes/node-a/streams/billing/desired-state -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-key-1' -d '{"state":"stopped","config_version":"v1"}'
show '`PUT /api/v1/nodes/node-a/streams/billing/desired-state` — the same request again: replayed' 0 op PUT /api/v1/nodes/node-a/streams/billing/desired-state -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-key-1' -d '{"state":"stopped","config_version":"v1"}'
show '`PUT /api/v1/nodes/node-a/streams/billing/desired-state` — the same key, another body: 409' 0 op PUT /api/v1/nodes/node-a/streams/billing/desired-state -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-key-1' -d '{"state":"running","config_version":"v1"}'
poll 5000
execute
show '`POST /api/v1/nodes/node-a/streams/orders/pause` — not an action: 404' 0 op POST /api/v1/nodes/node-a/streams/orders/pause
show '`GET /api/v1/nodes/node-a/streams/ghost` — 404' 0 op GET /api/v1/nodes/node-a/streams/ghost
show '`GET /api/v1/nodes/ghost` — 404' 0 op GET /api/v1/nodes/ghost
show '`GET /api/v1/operations/{id}` — unknown id: 404' 0 op GET /api/v1/operations/01a20000-0000-7000-8000-000000000000
show '`DELETE /api/v1/nodes` — 405' 0 op DELETE /api/v1/nodes

echo "### Jobs"
echo
note "The submit flow of spec rule 5, with the fake Agent running the job's commands and observing it. The spec below is a keyed running count from generated events to the drop output, checkpointed to a file:// store:"
SPEC='{"id":"user-counts","version":1,"operators":[{"id":"events","kind":"source"},{"id":"counts","kind":"aggregate","config":{"key":"this.user","aggregations":[{"name":"n","function":"count"}]}},{"id":"out","kind":"sink"}],"edges":[{"from":"events","to":"counts","partitioned":true},{"from":"counts","to":"out"}],"sources":[{"operator_id":"events","input_type":"generate","config":{"context":"{\"user\": \"u{{random:5}}\"}","interval":"10ms"}}],"sinks":[{"operator_id":"out","output_type":"drop"}],"state":{"backend":"embedded_kv"},"checkpoint":{"interval_ms":1000,"object_store_uri":"file:///var/lib/flowplane/checkpoints"}}'
printf '```json\n%s\n```\n\n' "$(printf '%s' "$SPEC" | python3 -m json.tool --indent 2)"
JSEQ=0
declare -A JOBS=()
# job_observe: posts the fake Agent's job observations quietly.
job_observe() {
	local IFS=,
	local all=("${JOBS[@]}")
	JSEQ=$((JSEQ + 1))
	call sess POST /api/v1/agent/job-observations -H 'Content-Type: application/json' -d "{\"boot_id\":\"$BOOT\",\"report_seq\":$JSEQ,\"jobs\":[${all[*]}]}"
	[ "$status" = 204 ] || { echo "job-observations: $status $(cat body)" >&2; exit 1; }
}
# job_execute: runs the first polled job command as a node would, then
# observes the job.
job_execute() {
	local id at res gen op ver st res_json=""
	id=$(jget cmds.json 'j["items"][0]["command_id"]')
	at=$(jget cmds.json 'j["items"][0]["attempt_id"]')
	res=$(jget cmds.json 'j["items"][0]["resource_id"]')
	gen=$(jget cmds.json 'j["items"][0]["generation"]')
	op=$(jget cmds.json 'j["items"][0]["operation"]')
	ver=$(jget cmds.json 'j["items"][0]["payload"].get("job_version", 0)')
	result "$id" "$at" acknowledged
	case "$op" in
	job_start) JOBS[$res]="{\"id\":\"$res\",\"state\":\"running\",\"generation\":$gen,\"version\":$ver,\"tasks\":[{\"id\":\"events#0\",\"state\":\"running\",\"watermark\":0,\"records_in\":1200,\"records_out\":1200},{\"id\":\"counts#0\",\"state\":\"running\",\"watermark\":0,\"records_in\":1200,\"records_out\":1200}],\"watermark_lag_ms\":12,\"checkpoint_duration_ms\":0,\"checkpoint_failures\":0,\"state_bytes\":0,\"restarts\":0}" ;;
	job_stop) JOBS[$res]="{\"id\":\"$res\",\"state\":\"stopped\",\"generation\":$gen,\"version\":$ver,\"tasks\":[]}" ;;
	job_checkpoint) res_json=",\"result\":{\"job_id\":\"$res\",\"kind\":\"checkpoint\",\"id\":7,\"job_version\":1,\"format_version\":1,\"max_parallelism\":128,\"stateful_operators\":[\"counts\"],\"location\":\"file:///var/lib/flowplane/checkpoints/user-counts/checkpoint-00000000000000000007/_manifest.json\",\"bytes\":18432,\"state\":\"completed\",\"created_at\":\"2026-11-24T09:00:00.000Z\"}" ;;
	esac
	call sess POST "/api/v1/agent/commands/$id/result" -H 'Content-Type: application/json' -d "{\"attempt_id\":\"$at\",\"state\":\"succeeded\"$res_json}"
	job_observe
}
show '`POST /api/v1/jobs/validate` — against node-a: Hub checks, and a read-only job_validate on the node' 0 op POST /api/v1/jobs/validate -H 'Content-Type: application/json' -d "{\"spec\":$SPEC,\"node_ids\":[\"node-a\"]}"
poll 5000
VID=$(jget cmds.json 'j["items"][0]["command_id"]'); VAT=$(jget cmds.json 'j["items"][0]["attempt_id"]')
result "$VID" "$VAT" acknowledged
call sess POST "/api/v1/agent/commands/$VID/result" -H 'Content-Type: application/json' -d "{\"attempt_id\":\"$VAT\",\"state\":\"succeeded\",\"result\":{\"node_id\":\"node-a\",\"valid\":true,\"checks\":[{\"check\":\"spec\",\"status\":\"passed\"},{\"check\":\"components\",\"status\":\"passed\"},{\"check\":\"secrets\",\"status\":\"passed\"},{\"check\":\"state_backend\",\"status\":\"passed\"},{\"check\":\"artifact_store\",\"status\":\"passed\"}]}}"
show '`GET /api/v1/operations/{id}` — the report of the node, on result' 0 op GET "/api/v1/operations/$VID"
show '`POST /api/v1/jobs` — created stopped; the Hub places it' 0 op POST /api/v1/jobs -H 'Content-Type: application/json' -d "{\"spec\":$SPEC,\"desired_state\":\"stopped\"}"
poll 5000
job_execute
sleep 0.3
show '`GET /api/v1/jobs/user-counts`' 0 op GET /api/v1/jobs/user-counts
show '`GET /api/v1/jobs/user-counts/plan`' 0 op GET /api/v1/jobs/user-counts/plan
show '`GET /api/v1/jobs/user-counts/detail` — stopped: tasks not observed' 0 op GET /api/v1/jobs/user-counts/detail
show '`PUT /api/v1/jobs/user-counts/desired-state` — running' 0 op PUT /api/v1/jobs/user-counts/desired-state -H 'Content-Type: application/json' -H 'If-Match: "generation-1"' -d '{"state":"running"}'
poll 5000
job_execute
sleep 0.3
show '`GET /api/v1/jobs/user-counts/detail` — running, observed' 0 op GET /api/v1/jobs/user-counts/detail
show '`POST /api/v1/jobs/user-counts/checkpoints`' 0 op POST /api/v1/jobs/user-counts/checkpoints
poll 5000
job_execute
show '`GET /api/v1/jobs/user-counts/checkpoints`' 0 op GET /api/v1/jobs/user-counts/checkpoints
show '`POST /api/v1/jobs/user-counts/upgrades` — while it runs: 409' 0 op POST /api/v1/jobs/user-counts/upgrades -H 'Content-Type: application/json' -d "{\"spec\":${SPEC/\"version\":1/\"version\":2},\"mode\":\"savepoint\",\"strict\":true}"
show '`PUT /api/v1/jobs/user-counts/desired-state` — stale If-Match: 412' 0 op PUT /api/v1/jobs/user-counts/desired-state -H 'Content-Type: application/json' -H 'If-Match: "generation-1"' -d '{"state":"stopped"}'
show '`POST /api/v1/jobs` — a bad spec: 422 with every path' 0 op POST /api/v1/jobs -H 'Content-Type: application/json' -d '{"spec":{"id":"bad","version":0,"operators":[{"id":"j","kind":"join"}]},"desired_state":"stopped"}'
show '`GET /api/v1/jobs/ghost` — 404' 0 op GET /api/v1/jobs/ghost
show '`GET /api/v1/jobs`' 0 op GET /api/v1/jobs

echo "### An offline node, cancel, and an ambiguous legacy call"
echo
show '`PUT /api/v1/nodes/node-b/streams/orders/desired-state` — a node that never registered' 0 op PUT /api/v1/nodes/node-b/streams/orders/desired-state -H 'Content-Type: application/json' -d '{"state":"running"}'
OPB=$(jget body 'j["operation_id"]')
show '`GET /api/v1/nodes/node-b/streams/orders` — pending: node offline' 0 op GET /api/v1/nodes/node-b/streams/orders
show '`GET /api/v1/nodes/node-b` — known only from desired state' 0 op GET /api/v1/nodes/node-b
show '`POST /api/v1/streams/orders/restart` — legacy, two nodes: 409' 0 op POST /api/v1/streams/orders/restart
show '`DELETE /api/v1/operations/{id}` — pending: cancelled' 0 op DELETE "/api/v1/operations/$OPB"
show '`DELETE /api/v1/operations/{id}` — again: 409' 0 op DELETE "/api/v1/operations/$OPB"

echo "### Retry and redelivery"
echo
note "An attempt the Agent reports as \`timed_out\` (or one that expires) puts the operation back to \`pending\` with a retry; the next attempt is dispatched after the backoff (1 s, doubling, at most 1 min):"
heartbeat
call op PUT /api/v1/nodes/node-a/streams/orders/desired-state -H 'Content-Type: application/json' -d '{"state":"stopped","config_version":"v1"}'
OPR=$(jget body 'j["operation_id"]')
poll 5000
AR=$(jget cmds.json 'j["items"][0]["attempt_id"]')
show '`POST /api/v1/agent/commands/{id}/result` — timed_out' 0 sess POST "/api/v1/agent/commands/$OPR/result" -H 'Content-Type: application/json' -d "{\"attempt_id\":\"$AR\",\"state\":\"timed_out\",\"failure\":{\"class\":\"transient\",\"code\":\"stop_timeout\",\"message\":\"the stream did not stop within 30s\"}}"
show '`GET /api/v1/operations/{id}` — retry under way' 0 op GET "/api/v1/operations/$OPR"
show '`GET /api/v1/nodes/node-a/streams/orders` — degraded: retrying' 0 op GET /api/v1/nodes/node-a/streams/orders
show '`GET /api/v1/agent/commands?wait_ms=5000` — after the backoff: the retry, a new attempt' 0 sess GET '/api/v1/agent/commands?wait_ms=5000'
cp body cmds.json
FIRST=$(jget cmds.json 'j["items"][0]["attempt_id"]')
note "This attempt is not acknowledged (as if the Agent died after the poll):"
show '`GET /api/v1/agent/commands?wait_ms=0` — right after: nothing new' 0 sess GET '/api/v1/agent/commands?wait_ms=0'
sleep 5
heartbeat
sleep 5.3
heartbeat
note "A command handed out but not acknowledged is handed out again 10 s later — same \`command_id\`, same \`attempt_id\`:"
show '`GET /api/v1/agent/commands?wait_ms=0` — 10 s later: the same attempt again' 0 sess GET '/api/v1/agent/commands?wait_ms=0'
[ "$(jget body 'j["items"][0]["attempt_id"]')" = "$FIRST" ] || echo "redelivery: another attempt" >&2
cp body cmds.json
execute

echo "### Drain and maintenance"
echo
show '`POST /api/v1/nodes/node-a/drain`' 0 op POST /api/v1/nodes/node-a/drain -H 'X-Correlation-ID: demo-drain'
show '`PUT /api/v1/nodes/node-a/streams/orders/desired-state` — while draining: accepted, not dispatched' 0 op PUT /api/v1/nodes/node-a/streams/orders/desired-state -H 'Content-Type: application/json' -d '{"state":"running","config_version":"v1"}'
show '`GET /api/v1/nodes/node-a/streams/orders` — blocked: draining' 0 op GET /api/v1/nodes/node-a/streams/orders
show '`GET /api/v1/agent/commands?wait_ms=1000` — while draining: none' 0 sess GET '/api/v1/agent/commands?wait_ms=1000'
show '`POST /api/v1/nodes/node-a/maintenance`' 0 op POST /api/v1/nodes/node-a/maintenance
show '`DELETE /api/v1/nodes/node-a/maintenance`' 0 op DELETE /api/v1/nodes/node-a/maintenance
poll 5000
execute
show '`GET /api/v1/events?kind=node_maintenance_changed`' 0 op GET '/api/v1/events?kind=node_maintenance_changed'
show '`POST /api/v1/nodes/ghost/drain` — 404' 0 op POST /api/v1/nodes/ghost/drain

echo "### A node without the capability"
echo
note "\`node-old\` registers without \`stream_control\`; a stream write for it fails for good with \`incompatible_capability\` (audited as rejected):"
call node POST /api/v1/agent/register -H 'Content-Type: application/json' -d '{"node_id":"node-old","boot_id":"boot-old","version":"0.5.9","protocol_version":1,"capabilities":["input:generate"]}'
SESSIONS+=("$(jget body 'j["session_token"]')")
call op PUT /api/v1/nodes/node-old/streams/legacy-feed/desired-state -H 'Content-Type: application/json' -d '{"state":"running"}'
OPO=$(jget body 'j["operation_id"]')
sleep 1.2
show '`GET /api/v1/operations/{id}` — failed: incompatible_capability' 0 op GET "/api/v1/operations/$OPO"
show '`GET /api/v1/audit?page_size=6`' 0 op GET '/api/v1/audit?page_size=6'

echo "### Sessions and node restarts"
echo
OLD=$SESSION
BOOT=boot-2
SEQ=0
show '`POST /api/v1/agent/register` — the node restarted: new boot_id' 0 node POST /api/v1/agent/register -H 'Content-Type: application/json' -d "$(register_body $NODE $BOOT)"
SESSION=$(jget body 'j["session_token"]')
SESSIONS+=("$SESSION")
SHOWTOK='$OLD_SESSION'
show '`POST /api/v1/agent/heartbeat` — with the replaced session: 401' 0 "raw:$OLD" POST /api/v1/agent/heartbeat -H 'Content-Type: application/json' -d '{"boot_id":"boot-1"}'
# The restarted node reports the generations it kept (the Agent keeps the
# Hub's last applied desire per stream on disk), from report_seq 1 again.
report '{"streams_running":1,"messages_received_total":35}'
sleep 0.3
show '`GET /api/v1/events?kind=node_restarted`' 0 op GET '/api/v1/events?kind=node_restarted'

echo "### Fleet status and metrics"
echo
show '`GET /api/v1/status`' 0 op GET /api/v1/status
show '`GET /api/v1/operations/status`' 0 op GET /api/v1/operations/status
show '`GET /api/v1/metrics?format=json`' 0 op GET '/api/v1/metrics?format=json'
show '`GET /api/v1/metrics?node_id=node-a`' 0 op GET '/api/v1/metrics?node_id=node-a'
echo '#### `GET /metrics` (abridged: the command series that moved, and the Hub gauges)'
echo
echo '```'
echo '$ curl -s "$HUB/metrics" | grep -E '"'"'^svc_(command_total|command_duration_count|hub_)'"'"' | grep -v " 0$"'
curl -s "$HUB/metrics" | grep -E '^svc_(command_total|command_duration_count|hub_)' | grep -v ' 0$' | grep -v '_bucket'
echo '```'
echo
show '`GET /api/v1/components?page_size=2`' 30 op GET '/api/v1/components?page_size=2'
show '`GET /api/v1/components/processor/json`' 20 op GET /api/v1/components/processor/json
show '`GET /api/v1/schema`' 10 op GET /api/v1/schema

echo "### After a Hub restart"
echo
note "The Hub is stopped (SIGTERM) and started again on the same storage. Desired state, operations, events and sessions are durable; leases are not, so the node is \`unavailable\` until its next heartbeat:"
stop_hub
start_hub
show '`GET /api/v1/system` — what the restore read' 0 op GET /api/v1/system
show '`GET /api/v1/nodes/node-a` — no lease yet' 0 op GET /api/v1/nodes/node-a
show '`POST /api/v1/agent/heartbeat` — the session survived the restart' 0 sess POST /api/v1/agent/heartbeat -H 'Content-Type: application/json' -d "{\"boot_id\":\"$BOOT\",\"capabilities\":[\"stream_control\",\"job_control\",\"input:generate\",\"output:drop\"]}"
sleep 0.3
show '`GET /api/v1/events?node_id=node-a&page_size=3`' 0 op GET '/api/v1/events?node_id=node-a&page_size=3'
note "Until the node reports to the new process, what it reported before is stale: kept, with \`reported_at\` and \`\"stale\": true\`, and convergence is \`unknown\`, never \`in_sync\`:"
show '`GET /api/v1/nodes/node-a/streams/orders` — stale' 0 op GET /api/v1/nodes/node-a/streams/orders
report '{"streams_running":1}'
sleep 1.2
show '`GET /api/v1/nodes/node-a/streams/orders` — after the first report' 0 op GET /api/v1/nodes/node-a/streams/orders

echo "### A full queue waits"
echo
note "With 64 attempts in flight on a node, a further intent waits for room (\`capacity\`) instead of failing:"
BOOT=boot-c
SEQ=0
call node POST /api/v1/agent/register -H 'Content-Type: application/json' -d "$(register_body node-c $BOOT)"
SESSION=$(jget body 'j["session_token"]')
SESSIONS+=("$SESSION")
for i in $(seq 1 65); do
	call op PUT "/api/v1/nodes/node-c/streams/s$i/desired-state" -H 'Content-Type: application/json' -d '{"state":"running"}'
done
sleep 1.2
show '`GET /api/v1/operations/status`' 0 op GET /api/v1/operations/status
echo '```'
echo '$ curl -s "$HUB/metrics" | grep '"'"'outcome="capacity"'"'"' | grep -v " 0$"'
curl -s "$HUB/metrics" | grep 'outcome="capacity"' | grep -v ' 0$'
echo '```'
echo

stop_hub
exec 1>&3 3>&-

# The session tokens the run saw never reach the doc, nor do the demo tokens.
sed -i -E 's/fps_[A-Za-z0-9_-]{20,}/fps_…/g' "$out"
for secret in "$OPTOK" "$NODETOK" "${SESSIONS[@]}"; do
	if grep -qF -- "$secret" "$out"; then
		echo "capture: a token value is in the output; refusing it" >&2
		exit 1
	fi
done

if [ "$write" = 1 ]; then
	doc=$repo/docs/hub-api.md
	python3 - "$doc" "$out" <<'PY'
import sys
doc, ex = sys.argv[1], sys.argv[2]
text = open(doc, encoding="utf-8").read()
begin, end = "<!-- examples:begin -->\n", "<!-- examples:end -->"
i, k = text.index(begin) + len(begin), text.index(end)
open(doc, "w", encoding="utf-8").write(text[:i] + "\n" + open(ex, encoding="utf-8").read() + text[k:])
PY
	echo "wrote the examples into $doc" >&2
else
	cat "$out"
fi
