# The two commands of the README: `make quickstart` and `make test`.
GO ?= go
PKGS := ./...

.PHONY: test quickstart build lint bench bench-hub fuzz

test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

quickstart:
	$(GO) run ./cmd/flowplane --config examples/quickstart.yaml

build:
	$(GO) build -o bin/flowplane ./cmd/flowplane

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

bench:
	bash bench/run.sh

# Durable desired-state writes through the Hub's HTTP API (bench/README.md).
bench-hub:
	$(GO) build -o bench/results/flowplane ./cmd/flowplane
	$(GO) build -o bench/results/hubwrites ./bench/hubwrites
	for i in 1 2 3; do bench/results/hubwrites -bin bench/results/flowplane || exit 1; done

# Run each fuzz target briefly (FUZZTIME=30s make fuzz for longer).
FUZZTIME ?= 10s
FUZZ_TARGETS := internal/secretref:FuzzResolve internal/config:FuzzMaterialize \
	internal/wal:FuzzDecodeBatch internal/wal:FuzzOpen internal/wal:FuzzOpenRecords \
	internal/hub:FuzzAgentBodies
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$fn ($$pkg)"; \
		$(GO) test ./$$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) || exit 1; \
	done
