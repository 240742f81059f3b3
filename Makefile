# The two commands of the README: `make quickstart` and `make test`.
GO ?= go
PKGS := ./...

.PHONY: test quickstart build lint bench fuzz

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

# Run each fuzz target briefly (FUZZTIME=30s make fuzz for longer).
FUZZTIME ?= 10s
fuzz:
	$(GO) test ./internal/secretref -run '^$$' -fuzz FuzzResolve -fuzztime $(FUZZTIME)
	$(GO) test ./internal/config -run '^$$' -fuzz FuzzMaterialize -fuzztime $(FUZZTIME)
