#!/usr/bin/env bash
# Stream-engine benchmark (make bench). Builds the binary, then for each
# pipeline prints messages/second (as the engine measured it), peak RSS (GNU
# time) and start-to-ready time; then the resting RSS of an idle node.
# Output goes to stdout; nothing is written into the repository except
# bench/results/ (ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
go build -o "$out/flowplane" ./cmd/flowplane
bin="$out/flowplane"

field() { # field NAME FILE: a numeric field of the JSON log lines
  grep -o "\"$1\":[0-9.]*" "$2" | tail -1 | cut -d: -f2
}

run_pipeline() { # name config
  local name=$1 conf=$2 state
  state=$(mktemp -d)
  /usr/bin/time -v "$bin" --config "$conf" --state-dir "$state" >"$out/$name.log" 2>"$out/$name.time"
  rm -rf "$state"
  local mps rss ready sent errors
  mps=$(field msgs_per_sec "$out/$name.log")
  sent=$(field sent "$out/$name.log")
  errors=$(field errors "$out/$name.log")
  if [ "${errors:-1}" != 0 ]; then
    echo "$name: the pipeline reported ${errors:-no} errors; see $out/$name.log" >&2
    exit 1
  fi
  ready=$(field ready_ms "$out/$name.log")
  rss=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print int($2/1024)}' "$out/$name.time")
  printf '%-22s %12s msg/s   sent %8s   peak RSS %4s MiB   ready %6s ms\n' "$name" "$mps" "$sent" "$rss" "$ready"
}

echo "flowplane stream benchmark on $(nproc) cores ($(go version | cut -d' ' -f3))"
for i in 1 2 3; do
  run_pipeline "batch1000-run$i" bench/pipeline-b1000.yaml
done
for i in 1 2 3; do
  run_pipeline "batch1-run$i" bench/pipeline-b1.yaml
done
run_pipeline "wal-group-commit" bench/wal.yaml

# Resting RSS: an idle node after it settled.
"$bin" --config bench/idle.yaml --state-dir "$(mktemp -d)" >/dev/null 2>&1 &
pid=$!
sleep 5
rss=$(awk '/VmRSS/ {print int($2/1024)}' "/proc/$pid/status")
kill -TERM "$pid"; wait "$pid" || true
printf '%-22s resting RSS %s MiB\n' "idle" "$rss"
