# The two commands of the README: `make quickstart` and `make test`.
GO ?= go
PKGS := ./...

.PHONY: test test-root test-chart quickstart build release image lint bench bench-jobs bench-fleet bench-fleet-jobs bench-hub bench-hub-writes bench-rollout fuzz

# CGO_ENABLED=0 for vet: flowplane has no C, and the packages vet compiles
# stay in the build cache for the static flowplane the end-to-end tests
# link (cmd/flowplane's child processes, tools/release's containers). The
# Helm chart's module (deploy/helm) is tested beside the root module's
# race-detector run, which leaves a core idle while its tests wait on
# child processes.
test:
	CGO_ENABLED=0 $(GO) vet $(PKGS)
	$(MAKE) -j2 --no-print-directory test-root test-chart

test-root:
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

test-chart:
	cd deploy/helm && $(GO) vet ./... && $(GO) test -count=1 ./...

quickstart:
	$(GO) run ./cmd/flowplane --config examples/quickstart.yaml

# -buildvcs=auto: flowplane version names the commit when built from a checkout.
build:
	$(GO) build -buildvcs=auto -o bin/flowplane ./cmd/flowplane

# Release archives, SBOMs and SHA256SUMS in dist/release (docs/deploy.md).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
release:
	$(GO) run ./tools/release -image -version $(VERSION) -out dist/release

# The container image alone, for this machine's architecture:
# podman load -i dist/image/flowplane_$(VERSION)_linux_<arch>.oci.tar
image:
	$(GO) run ./tools/release -image -targets linux/$$($(GO) env GOARCH) -version $(VERSION) -out dist/image

# deploy/helm is a module of its own (the Helm chart's tests): vetted and
# tested from its directory.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	cd deploy/helm && $(GO) vet ./... && $$($(GO) -C ../.. tool -n staticcheck) ./...

bench:
	bash bench/run.sh

# Job kernel (bench/jobs, bench/README.md): window count, Nexmark, checkpoint.
bench-jobs:
	$(GO) run ./bench/jobs -mode window
	$(GO) run ./bench/jobs -mode nexmark -events 5000000
	$(GO) run ./bench/jobs -mode checkpoint

# Control-plane write-to-in_sync latency: a Hub and three Agents (bench/README.md).
bench-fleet:
	$(GO) run ./bench/fleet

# Jobs on the Hub: create-to-in_sync over 200 jobs, then checkpoint
# trigger-to-checkpoint_completed (bench/README.md).
bench-fleet-jobs:
	$(GO) run ./bench/fleet -jobs 200 -checkpoints 200 -concurrency 8

# Hub benchmarks (bench/hubload, bench/README.md): a simulated fleet of
# HUB_AGENTS agents for HUB_DURATION (Hub CPU and RSS), then HUB_WRITES
# desired-state writes to a long-polling agent (write-to-delivery latency).
# Minutes long; not part of make test.
HUB_AGENTS ?= 10000
HUB_DURATION ?= 60s
HUB_WRITES ?= 1000
bench-hub:
	$(GO) run ./bench/hubload -mode agents -agents $(HUB_AGENTS) -duration $(HUB_DURATION)
	$(GO) run ./bench/hubload -mode latency -writes $(HUB_WRITES)

# Configuration rollouts (bench/hubload -mode rollout, bench/README.md):
# ROLLOUT_RUNS rollouts of a new configuration to ROLLOUT_AGENTS simulated
# agents in waves of ROLLOUT_BATCH, each timed create -> succeeded, with the
# Hub's CPU. About a minute; not part of make test.
ROLLOUT_AGENTS ?= 100
ROLLOUT_BATCH ?= 10
ROLLOUT_RUNS ?= 3
bench-rollout:
	$(GO) run ./bench/hubload -mode rollout -agents $(ROLLOUT_AGENTS) -batch $(ROLLOUT_BATCH) -runs $(ROLLOUT_RUNS)

# Durable desired-state writes/s through the Hub's HTTP API against the
# disk's raw fsync rate, three runs (bench/README.md).
# Broker connectors (bench/brokers, bench/README.md): Kafka (kfake) and
# NATS JetStream (embedded nats-server) in the harness' process, flowplane
# and, with BENTHOS=/path/to/benthos, Benthos 4.x side by side as child
# processes; BROKERS_RECORDS records per run, each run at most 60 s.
BROKERS_RECORDS ?= 1000000
BENTHOS ?=
.PHONY: bench-brokers
bench-brokers:
	$(GO) build -o bench/results/flowplane ./cmd/flowplane
	$(GO) run ./bench/brokers -flowplane bench/results/flowplane -records $(BROKERS_RECORDS) $(if $(BENTHOS),-benthos $(BENTHOS))

bench-hub-writes:
	$(GO) build -o bench/results/flowplane ./cmd/flowplane
	$(GO) build -o bench/results/hubwrites ./bench/hubwrites
	for i in 1 2 3; do bench/results/hubwrites -bin bench/results/flowplane || exit 1; done

# Run each fuzz target briefly (FUZZTIME=30s make fuzz for longer).
FUZZTIME ?= 10s
FUZZ_TARGETS := internal/secretref:FuzzResolve internal/config:FuzzMaterialize \
	internal/wal:FuzzDecodeBatch internal/wal:FuzzOpen internal/wal:FuzzOpenRecords \
	internal/hub:FuzzAgentBodies internal/testsuite:FuzzParse
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$fn ($$pkg)"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

# Split placement (bench/split, bench/split/README.md): a Hub and three
# Agents in network namespaces (root and ip(8) needed); a keyed window job
# colocated on one node, split over two, and checkpointed across three.
.PHONY: bench-split
bench-split:
	$(GO) run ./bench/split

# Data-plane flood (bench/dataflood, bench/README.md): 20,000 connections
# that never authenticate held against a node's data port; the node's RSS,
# Node API latency and a stream's progress meanwhile.
.PHONY: bench-dataflood
bench-dataflood:
	$(GO) run ./bench/dataflood

# Hub flood (bench/hubflood, bench/README.md): 300 fake nodes registering
# with the node token and reporting in a loop, as filed in issue 29 and
# within the Hub's bounds; database size, Hub RSS, GET /streams latency.
.PHONY: bench-hubflood
bench-hubflood:
	$(GO) run ./bench/hubflood
