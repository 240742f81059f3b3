#!/usr/bin/env bash
# Prints the "Examples" part of docs/node-api.md, captured from a real node
# on 127.0.0.1:18181: bash docs/tools/capture-node-api-examples.sh > /tmp/ex.md
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
go build -C "$repo" -o "$work/flowplane" ./cmd/flowplane
cd "$work"
printf 'logging: {level: warn}\nhealth_check: {address: 127.0.0.1:18181}\nstreams:\n  - id: orders\n    input: {type: generate, context: \x27{"id": {{count}}, "v": {{random}}}\x27, interval: 100ms}\n    pipeline: {processors: [{type: json}]}\n    output: {type: drop}\n' > node.yaml
./flowplane --config node.yaml --state-dir "$work/state" > log 2>&1 &
pid=$!; sleep 0.6; B=http://127.0.0.1:18181
show() { echo "### \`$1 $2\`"; echo; echo '```'; echo "\$ curl -s -X $1 ${3:-}$B$2"; curl -s -X $1 ${3:-} "$B$2" | python3 -m json.tool 2>/dev/null | head -${4:-40}; echo '```'; echo; }
printf 'streams:\n  - input: {type: generat}\n    pipeline: {processors: []}\n    output: {type: drop}\n' > bad.yaml
printf 'logging: {level: warn}\nhealth_check: {address: 127.0.0.1:18181}\nstreams:\n  - id: orders\n    input: {type: generate, context: \x27{"id": {{count}}, "v": {{random}}}\x27, interval: 100ms}\n    pipeline: {processors: [{type: json}]}\n    output: {type: drop}\n  - id: audit\n    input: {type: generate, context: \x27{}\x27, interval: 1s}\n    pipeline: {processors: []}\n    output: {type: drop}\n' > draft.yaml
show GET /system "" 14
show GET /nodes "" 30
show GET /streams "" 45
show GET /status
show GET /node
show GET /streams/orders
show POST /streams/orders/restart "-H Content-Type:application/json -H X-Correlation-ID:demo-1 "
sleep 0.3
show GET "/operations?correlation_id=demo-1" "" 60
show GET "/events?page_size=2"
OP=$(curl -s "$B/operations?page_size=1" | python3 -c 'import json,sys;print(json.load(sys.stdin)["items"][0]["operation_id"])')
show GET /operations/$OP "" 25
show DELETE /operations/$OP "-H Content-Type:application/json "
show GET /configuration
show POST /configuration/validate "-H Content-Type:application/yaml --data-binary @bad.yaml "
show PUT /configuration/draft "-H Content-Type:application/yaml --data-binary @draft.yaml " 20
show GET /configuration/draft "" 12
show GET /configuration/diff
show POST /configuration/apply "-H Content-Type:application/yaml --data-binary @draft.yaml "
sleep 0.3
show GET /configuration/versions
show POST /configuration/rollback/v1 "-H Content-Type:application/json " 12
show GET "/components?page_size=3"
show GET /components/processor/json "" 30
echo "### \`GET /schema\` (abridged)"; echo; echo '```'; curl -s $B/schema | python3 -m json.tool | head -12; echo '```'; echo
echo "### \`GET /metrics\` (abridged)"; echo; echo '```'; curl -s $B/metrics | grep -E "^(# (HELP|TYPE) )?svc_stream_(received|sent)_total" | head -6; echo '```'; echo
show GET /readiness
show GET /health
show GET /liveness
show DELETE /streams
