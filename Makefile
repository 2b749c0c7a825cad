# edgesched — build, test and demo. Needs only Go (see go.mod for the version).
# Never cleans the Go build cache: rebuilding Kubernetes parts takes minutes.

GO        ?= go
BIN       ?= bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X github.com/edgesched/edgesched/internal/edgectl.Version=$(VERSION)
PKGS      := ./...
FUZZTIME  ?= 15s
DEMO_OUT  ?= demo-out

.PHONY: all build demo test test-short bench lint fmt generate fuzz tidy clean help train e2e-bin

all: lint build test

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/edgectl
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/edgectl ./cmd/edgectl

demo: build ## run the demo: schedulers compared on openb and an edge scenario, then federated learning over embedded NATS
	./$(BIN)/edgectl demo --out $(DEMO_OUT)

E2E_BIN   ?= $(BIN)/e2e

e2e-bin: ## build the programs the end-to-end tests start (kine, kube-apiserver, kube-scheduler, edge-scheduler)
	@echo "building end-to-end binaries into $(E2E_BIN) (minutes the first time on a cold Go build cache)"
	$(GO) build -o $(E2E_BIN)/ github.com/k3s-io/kine k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler ./cmd/edge-scheduler

test: lint e2e-bin ## lint, then all tests with the race detector, end-to-end included
	EDGESCHED_E2E_BIN_DIR=$(abspath $(E2E_BIN)) $(GO) test -race -count=1 -timeout 20m $(PKGS)
	@# the AVX2 kernel exists only with Go's experimental SIMD package
	GOEXPERIMENT=simd $(GO) test -count=1 -run 'SIMD|Int8|Exact' ./quant/

test-short: ## quick tests
	$(GO) test -short -count=1 $(PKGS)

MODELS    ?= default edge
TRAIN_OUT ?= out/train

train: build ## retrain the shipped models (models/*.esm) and check they are reproduced bit for bit; INSTALL=1 replaces them
	@for m in $(MODELS); do \
		./$(BIN)/edgectl train --config configs/train-$$m.yaml --out $(TRAIN_OUT)/$$m --progress never || exit 1; \
		if [ "$(INSTALL)" = 1 ]; then cp $(TRAIN_OUT)/$$m/model.esm models/$$m.esm && echo "installed models/$$m.esm"; \
		elif cmp -s $(TRAIN_OUT)/$$m/model.esm models/$$m.esm; then echo "models/$$m.esm: reproduced bit for bit"; \
		else echo "models/$$m.esm: NOT reproduced ($(TRAIN_OUT)/$$m/model.esm differs; INSTALL=1 replaces it)"; exit 1; fi; \
	done

bench: ## benchmarks (speed goals are measured here, never asserted in tests)
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./sim/... ./policy/... ./models/... ./quant/... ./federated/...
	@# coordinator throughput: 1,000 sites, a 50k-parameter model, loopback NATS (one round per run)
	$(GO) test -run '^$$' -bench CoordinatorThroughput -benchtime 1x -count 3 ./test/fl/
	GOEXPERIMENT=simd $(GO) test -run '^$$' -bench . -benchmem -count 1 ./quant/...

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

generate: ## regenerate generated files (committed; generators pinned in go.mod)
	$(GO) generate $(PKGS)

fuzz: ## run every fuzz target for FUZZTIME each
	@for target in $$($(GO) test -list 'Fuzz.*' ./... | awk '/^Fuzz/{names[n++]=$$1} /^ok/{for(i=0;i<n;i++) print $$2"@"names[i]; n=0}'); do \
		pkg=$${target%@*}; fn=$${target#*@}; \
		echo "== $$pkg $$fn"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg || exit 1; \
	done

tidy: ## go mod tidy
	$(GO) mod tidy

clean: ## remove build outputs (not the Go cache)
	rm -rf $(BIN) $(DEMO_OUT)
