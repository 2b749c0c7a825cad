# edgesched — build, test and demo. Needs only Go (see go.mod for the version).
# Never cleans the Go build cache: rebuilding Kubernetes parts takes minutes.

GO        ?= go
BIN       ?= bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# Every binary prints these with --version (internal/cli, docs/cli.md); a
# plain `go build` falls back to the commit Go records (vcs.revision).
LDFLAGS   := -X github.com/edgesched/edgesched/internal/cli.Version=$(VERSION) -X github.com/edgesched/edgesched/internal/cli.Commit=$(COMMIT) -X github.com/edgesched/edgesched/internal/cli.Date=$(BUILD_DATE)
PKGS      := ./...
FUZZTIME  ?= 15s
DEMO_OUT  ?= demo-out

.PHONY: all agent scheduler build demo test test-short bench lint fmt generate fuzz tidy clean help train e2e-bin helm manifests man images test-images image-test-tools kubectl-plugin

all: lint build test

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# edgectl on amd64 with Go's SIMD experiment, as edge-scheduler (below):
# the float scorer that simulates and trains runs its AVX2 kernel (the
# same scores bit for bit: policy/nn's and models/' FloatScorer tests run
# both ways in make test, and .ci/run's make train reproduces the default
# model with it). EDGECTL_GOEXPERIMENT= builds it without.
EDGECTL_GOEXPERIMENT ?= $(SCHEDULER_GOEXPERIMENT)

build: ## build bin/edgectl (GOEXPERIMENT=simd on amd64)
	GOEXPERIMENT=$(EDGECTL_GOEXPERIMENT) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/edgectl ./cmd/edgectl

# kubectl finds plugins by name on PATH: `kubectl edgesched round list`
# runs bin/kubectl-edgesched, which is edgectl (docs/quickstart-k3s.md).
kubectl-plugin: build ## bin/kubectl-edgesched: edgectl as a kubectl plugin (put bin/ on PATH)
	ln -sf edgectl $(BIN)/kubectl-edgesched
	@echo "kubectl edgesched ... runs $(BIN)/edgectl once $(abspath $(BIN)) is on PATH"

demo: build ## run the demo: schedulers compared on openb and an edge scenario, then federated learning over embedded NATS
	./$(BIN)/edgectl demo --out $(DEMO_OUT)

E2E_BIN   ?= $(BIN)/e2e

# edge-agent is built without gorgonia.org/tensor (policy/nn/tensor_gonum.go:
# the same gonum Sgemm, bit-identical results, 24.6 MB stripped instead of
# 36.4 MB; docs/agent.md "Binary size"). internal/agentcmd/deps_test.go and
# test/e2e/build.go read this line; `make lint` vets with these tags too.
AGENT_TAGS ?= nogorgonia

e2e-bin: helm ## build the programs the end-to-end tests start (kine, kube-apiserver, kube-scheduler, edge-scheduler, edge-agent) and helm
	@echo "building end-to-end binaries into $(E2E_BIN) (minutes the first time on a cold Go build cache)"
	$(GO) build -o $(E2E_BIN)/ github.com/k3s-io/kine k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
	$(GO) build -tags "$(SCHEDULER_TAGS)" -o $(E2E_BIN)/ ./cmd/edge-scheduler
	$(GO) build -tags "$(AGENT_TAGS)" -o $(E2E_BIN)/ ./cmd/edge-agent

agent: ## build bin/edge-agent as released (stripped, AGENT_TAGS)
	$(GO) build -trimpath -tags "$(AGENT_TAGS)" -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/edge-agent ./cmd/edge-agent
	@ls -l $(BIN)/edge-agent

# edge-scheduler as released: on amd64 with Go's SIMD experiment, so the
# plugin scores with the AVX2/AVX-512 int8 kernel (~85 ns per node instead
# of ~900; the same scores, tested bit for bit against the portable kernel:
# docs/quant.md "Kernels"). The first build compiles every package again
# for the experiment (about 4 minutes on 2 cores). SCHEDULER_GOEXPERIMENT=
# builds it without; the end-to-end tests run the portable build.
SCHEDULER_GOEXPERIMENT ?= $(if $(filter amd64,$(shell $(GO) env GOARCH)),simd,)
# edge-scheduler serves int8 models only: like edge-agent it is built
# without gorgonia.org/tensor (AGENT_TAGS above; docs/edge-plugin.md
# "Binary size"). internal/schedcmd/deps_test.go reads this line.
SCHEDULER_TAGS ?= nogorgonia

scheduler: ## build bin/edge-scheduler as released (stripped, SCHEDULER_TAGS; GOEXPERIMENT=simd on amd64)
	GOEXPERIMENT=$(SCHEDULER_GOEXPERIMENT) $(GO) build -trimpath -tags "$(SCHEDULER_TAGS)" -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/edge-scheduler ./cmd/edge-scheduler
	@ls -l $(BIN)/edge-scheduler

# Container images (docs/quickstart-k3s.md, "Images"): edge-agent,
# edge-scheduler, edge-coordinator and edgectl for linux/amd64 and
# linux/arm64 (the agent also for linux/arm/v7), static binaries
# (CGO_ENABLED=0, -trimpath, -s -w) on a base internal/ociimage builds
# itself, assembled with go-containerregistry (go.mod): no Docker, no
# registry. Reproducible: every time stamp is the commit's
# (SOURCE_DATE_EPOCH), so a commit gives the same digests on any machine
# with the same Go. Outputs in IMAGES_OUT: oci/ (an OCI layout, one
# multi-platform index per program), archives/NAME-linux-ARCH.tar (what
# K3s imports), images.json, images.txt. An unchanged build of a clean
# tree is reused; IMAGES_FLAGS=--force rebuilds.
IMAGES_OUT     ?= build/images
IMAGE_REGISTRY ?= ghcr.io/edgesched
IMAGE_TAG      ?= $(VERSION)
IMAGES_FLAGS   ?=
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_DATE     := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
IMAGE_LDFLAGS   = -s -w -X github.com/edgesched/edgesched/internal/cli.Version=$(VERSION) -X github.com/edgesched/edgesched/internal/cli.Commit=$(COMMIT) -X github.com/edgesched/edgesched/internal/cli.Date=$(IMAGE_DATE)

images: ## build the OCI images and K3s archives into IMAGES_OUT (reused when unchanged); prints digests and sizes
	$(GO) run ./tools/edge-images --out $(IMAGES_OUT) --registry $(IMAGE_REGISTRY) --tag $(IMAGE_TAG) \
		--release $(VERSION) --commit $(COMMIT) --source-date-epoch $(SOURCE_DATE_EPOCH) \
		--ldflags "$(IMAGE_LDFLAGS)" --agent-tags "$(AGENT_TAGS)" --scheduler-tags "$(SCHEDULER_TAGS)" --scheduler-goexperiment simd $(IMAGES_FLAGS)

# What test-images runs besides Go, from Debian's packages, installed as
# root when missing (the tests print why they skip otherwise):
# qemu-user-static (the arm64 and arm/v7 programs and unit tests) and
# containerd with runc (importing the archives as K3s does, running the
# amd64 images).
IMAGE_TEST_PKGS := qemu-aarch64-static:qemu-user-static containerd:containerd ctr:containerd runc:runc
image-test-tools:
	@pkgs=; for e in $(IMAGE_TEST_PKGS); do command -v $${e%%:*} >/dev/null 2>&1 || pkgs="$$pkgs $${e#*:}"; done; \
	pkgs=$$(echo $$pkgs | tr ' ' '\n' | sort -u | xargs); \
	if [ -n "$$pkgs" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "for test-images: installing Debian's $$pkgs"; \
			{ apt-get update -qq && apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null; } || echo "could not install $$pkgs"; \
		else echo "for test-images: missing $$pkgs (installing needs root and apt-get): those tests will skip"; fi; \
	fi

test-images: images image-test-tools ## check the images without a cluster (test/images): platforms, users, --version, ELF, arm64 under qemu
	EDGESCHED_IMAGES_DIR=$(abspath $(IMAGES_OUT)) $(GO) test -count=1 -timeout 40m -v ./test/images/

# Helm, pinned (test/e2e/deploy_e2e_test.go checks this line): built with
# `go install pkg@version` into bin/tools, so the main go.mod is untouched.
HELM_VERSION ?= v3.22.0
TOOLS     ?= $(BIN)/tools
HELM      := $(TOOLS)/helm

helm: $(TOOLS)/.helm-$(HELM_VERSION) ## build the pinned helm into bin/tools (minutes the first time)

$(TOOLS)/.helm-$(HELM_VERSION):
	GOBIN=$(abspath $(TOOLS)) $(GO) install -ldflags "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)" helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	@touch $@

# deploy/manifests/NAME.yaml: the chart rendered for K3s's auto-deploy
# folder; the header records the command (the e2e test re-runs it and
# compares, so the files cannot rot).
MANIFESTS_NS := edgesched-system
# the APIs of the clusters the manifests are for, beyond those helm
# template assumes (the chart leaves out what needs another)
MANIFESTS_API := admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy
define render-manifest
	@{ echo "# Generated by \`make manifests\` from deploy/helm/edgesched; do not edit (docs/deploy.md)."; \
	  echo "# Rendered with: helm template edgesched deploy/helm/edgesched --namespace $(MANIFESTS_NS) --api-versions $(MANIFESTS_API) $(2)"; \
	  $(HELM) template edgesched deploy/helm/edgesched --namespace $(MANIFESTS_NS) --api-versions $(MANIFESTS_API) $(2); } > deploy/manifests/$(1).yaml.tmp
	@mv deploy/manifests/$(1).yaml.tmp deploy/manifests/$(1).yaml && echo "wrote deploy/manifests/$(1).yaml"
endef

# With images built (make images), also the manifests of exactly those
# images, not committed: IMAGES_OUT/manifests/{site,cloud}.yaml by digest
# (for a registry) and {site,cloud}-airgap.yaml by tag (for archives
# imported into K3s), for the auto-deploy folder (docs/quickstart-k3s.md).
define render-image-manifest
	@{ echo "# Generated by \`make manifests\` from deploy/helm/edgesched with the images of $(IMAGES_OUT)/images.json."; \
	  echo "# Rendered with: helm template edgesched deploy/helm/edgesched --namespace $(MANIFESTS_NS) --api-versions $(MANIFESTS_API) -f $(IMAGES_OUT)/$(3) $(2)"; \
	  $(HELM) template edgesched deploy/helm/edgesched --namespace $(MANIFESTS_NS) --api-versions $(MANIFESTS_API) -f $(IMAGES_OUT)/$(3) $(2); } > $(IMAGES_OUT)/manifests/$(1).yaml.tmp
	@mv $(IMAGES_OUT)/manifests/$(1).yaml.tmp $(IMAGES_OUT)/manifests/$(1).yaml && echo "wrote $(IMAGES_OUT)/manifests/$(1).yaml"
endef

manifests: helm ## render deploy/manifests/{site,cloud}.yaml from the Helm chart (committed), and IMAGES_OUT/manifests with the built images' digests
	$(call render-manifest,site,--set namespace.create=true)
	$(call render-manifest,cloud,--set namespace.create=true --set site.enabled=false --set cloud.enabled=true)
	@if [ -f $(IMAGES_OUT)/helm-values.yaml ]; then mkdir -p $(IMAGES_OUT)/manifests; else \
		echo "no $(IMAGES_OUT)/helm-values.yaml: make images first for manifests that name this build's images"; fi
	$(if $(wildcard $(IMAGES_OUT)/helm-values.yaml),$(call render-image-manifest,site,--set namespace.create=true,helm-values.yaml))
	$(if $(wildcard $(IMAGES_OUT)/helm-values.yaml),$(call render-image-manifest,cloud,--set namespace.create=true --set site.enabled=false --set cloud.enabled=true,helm-values.yaml))
	$(if $(wildcard $(IMAGES_OUT)/helm-values-airgap.yaml),$(call render-image-manifest,site-airgap,--set namespace.create=true,helm-values-airgap.yaml))
	$(if $(wildcard $(IMAGES_OUT)/helm-values-airgap.yaml),$(call render-image-manifest,cloud-airgap,--set namespace.create=true --set site.enabled=false --set cloud.enabled=true,helm-values-airgap.yaml))

test: lint e2e-bin onnx-tools ## lint, then all tests with the race detector, end-to-end included
	EDGESCHED_E2E_BIN_DIR=$(abspath $(E2E_BIN)) $(GO) test -race -count=1 -timeout 20m $(PKGS)
	@# the network's nogorgonia build (edge-agent's and edge-scheduler's) must compute what the default build does
	$(GO) test -tags "$(AGENT_TAGS)" -count=1 ./policy/... ./quant/ ./quant/int8net/ ./agent/flclient/
	$(GO) test -tags "$(SCHEDULER_TAGS)" -count=1 ./edge-plugin/...
	@# the AVX2 kernels exist only with Go's experimental SIMD package
	GOEXPERIMENT=simd $(GO) test -count=1 -run 'SIMD|Int8|Exact|KernelsHonour|ScorerWith' ./quant/ ./quant/int8net/
	GOEXPERIMENT=simd $(GO) test -count=1 -run 'FloatScorer' ./policy/nn/ ./models/
	@# junk must not delay an honest update beyond 5 s: a bound of the build without the race detector
	$(GO) test -count=1 -run '^TestJunkDoesNotDelayHonestUpdate$$' ./test/fl/

test-short: ## quick tests
	$(GO) test -short -count=1 $(PKGS)

# The long fault-injection run (`make test` runs a short one): docs/chaos.md.
CHAOS_AGENTS   ?= 50
CHAOS_DURATION ?= 15m

# The scheduler at fleet scale (docs/scale.md): kine + kube-apiserver, SCALE_NODES
# openb-like nodes, saturated batches of openb and edge-scenario pods; EdgePolicy
# next to the default profile in one edge-scheduler, each profile alone (memory),
# and extender mode behind the stock kube-scheduler. Prints a table, writes
# SCALE_OUT. `make test` runs a small version of the same test (200 nodes).
SCALE_NODES     ?= 5000
SCALE_PODS      ?= 1000
SCALE_ROUNDS    ?= 3
SCALE_EXTENDER_PODS ?= 100
SCALE_TELEMETRY ?= 60s
SCALE_PHASES    ?= side,memory,extender
SCALE_OUT       ?= $(abspath $(BIN))/bench-scale.json
# SCALE_PPROF: a directory for a CPU profile of the scheduler per batch (empty: none)
SCALE_PPROF     ?=
# The harness's binaries, edge-scheduler as released (with the SIMD int8
# kernel on amd64, SCHEDULER_GOEXPERIMENT), apart from the end-to-end
# tests' portable build in E2E_BIN.
SCALE_BIN       ?= $(BIN)/scale

.PHONY: bench-scale
bench-scale: ## scale harness at SCALE_NODES nodes (not in make test): pods/s side by side, latency per extension point, RSS, CPU; JSON in SCALE_OUT
	$(GO) build -o $(SCALE_BIN)/ github.com/k3s-io/kine k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
	GOEXPERIMENT=$(SCHEDULER_GOEXPERIMENT) $(GO) build -trimpath -tags "$(SCHEDULER_TAGS)" -o $(SCALE_BIN)/ ./cmd/edge-scheduler
	EDGESCHED_E2E_BIN_DIR=$(abspath $(SCALE_BIN)) EDGESCHED_SCALE_NODES=$(SCALE_NODES) EDGESCHED_SCALE_PODS=$(SCALE_PODS) \
		EDGESCHED_SCALE_ROUNDS=$(SCALE_ROUNDS) EDGESCHED_SCALE_TELEMETRY=$(SCALE_TELEMETRY) EDGESCHED_SCALE_PHASES=$(SCALE_PHASES) \
		EDGESCHED_SCALE_EXTENDER_PODS=$(SCALE_EXTENDER_PODS) \
		EDGESCHED_SCALE_OUT=$(SCALE_OUT) EDGESCHED_SCALE_PPROF=$(SCALE_PPROF) $(GO) test -count=1 -timeout 120m -run '^TestScale$$' -v ./test/e2e/

.PHONY: chaos
chaos: ## fault injection: CHAOS_AGENTS agents under mixed faults for CHAOS_DURATION (test/chaos)
	EDGESCHED_CHAOS_AGENTS=$(CHAOS_AGENTS) EDGESCHED_CHAOS_DURATION=$(CHAOS_DURATION) \
		$(GO) test -count=1 -timeout 90m -run '^TestChaos$$' -v ./test/chaos/

MODELS    ?= default edge edge-carbon edge-loaded edge-sage
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
	$(GO) test -run '^$$' -bench 'CoordinatorThroughput|UpdateStreamFloor' -benchtime 1x -count 3 ./test/fl/
	GOEXPERIMENT=simd $(GO) test -run '^$$' -bench . -benchmem -count 1 ./quant/...
	GOEXPERIMENT=simd $(GO) test -run '^$$' -bench 'InflateSweep|DefaultScorer' -benchmem -count 1 ./models/

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags "$(AGENT_TAGS)" ./policy/... ./quant/ ./quant/int8net/ ./agent/... ./internal/agentcmd/ ./cmd/edge-agent/
	$(GO) vet -tags "$(SCHEDULER_TAGS)" ./edge-plugin/... ./internal/schedcmd/ ./cmd/edge-scheduler/

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go')

generate: bpf-clang ## regenerate generated files (committed; generators pinned in go.mod)
	$(GO) generate $(PKGS)

# The ONNX protobuf types (policy/onnx/onnxpb/onnxpb.pb.go) from onnxpb.proto:
# protoc-gen-go driven by protocompile (internal/protogen), both pinned in
# go.mod, so this needs Go alone; TestGeneratedCode checks the result.
.PHONY: onnx-generate
onnx-generate: ## regenerate only the ONNX protobuf types (no clang needed)
	$(GO) generate ./policy/onnx/onnxpb/

# ONNX's own tools for policy/onnx's cross-checks: ONNX Runtime (npm
# onnxruntime-node) and the ONNX checker (Debian's python3-onnx, unpacked
# without installing it), installed by the tests into
# $EDGESCHED_TOOLS_CACHE (default ~/.cache/edgesched/onnx). This step
# installs what they run on (Debian's nodejs, npm, python3) when missing,
# then runs TestONNXTools, which installs the tools and prints their
# versions or why the tests that need them will skip (`go test` does not
# print a passing package's skips).
.PHONY: onnx-tools
onnx-tools: ## install ONNX Runtime and the ONNX checker for policy/onnx's tests, or say why they skip
	@pkgs=; command -v node >/dev/null 2>&1 || pkgs="$$pkgs nodejs"; command -v npm >/dev/null 2>&1 || pkgs="$$pkgs npm"; \
	[ -x /usr/bin/python3 ] || pkgs="$$pkgs python3"; \
	if [ -n "$$pkgs" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "for the ONNX tools: installing Debian's$$pkgs"; \
			apt-get update -qq && apt-get install -y -qq --no-install-recommends $$pkgs || echo "could not install$$pkgs"; \
		else echo "for the ONNX tools: missing$$pkgs (installing needs root and apt-get)"; fi; \
	fi
	@out=$$($(GO) test -race -count=1 -run '^TestONNXTools$$' -v ./policy/onnx/ 2>&1) || { echo "$$out"; exit 1; }; \
	echo "$$out" | sed -n 's/^ *tools_test.go:[0-9]*: /onnx-tools: /p'

# eBPF objects (agent/telemetry/bpf/*_bpfel.{o,go}) are committed: only
# regenerating them needs clang (Debian's, installed when missing; llvm
# brings llvm-strip, which bpf2go uses).
.PHONY: bpf-generate bpf-clang
bpf-generate: bpf-clang ## regenerate the committed eBPF objects of agent/telemetry/bpf from their C
	$(GO) generate ./agent/telemetry/bpf/

bpf-clang:
	@command -v clang >/dev/null 2>&1 && command -v llvm-strip >/dev/null 2>&1 || { \
		echo "clang or llvm-strip missing: installing Debian's clang and llvm"; \
		apt-get update -qq && apt-get install -y -qq clang llvm; }

fuzz: ## run every fuzz target for FUZZTIME each
	@for target in $$($(GO) test -list 'Fuzz.*' ./... | awk '/^Fuzz/{names[n++]=$$1} /^ok/{for(i=0;i<n;i++) print $$2"@"names[i]; n=0}'); do \
		pkg=$${target%@*}; fn=$${target#*@}; \
		echo "== $$pkg $$fn"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s $$pkg || exit 1; \
	done

man: ## edgectl's man pages from its command tree (github.com/spf13/cobra/doc) into $(BIN)/man; man -l $(BIN)/man/edgectl.1
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) $(GO) run ./internal/manpages/gen -out $(BIN)/man

tidy: ## go mod tidy
	$(GO) mod tidy

clean: ## remove build outputs (not the Go cache)
	rm -rf $(BIN) $(DEMO_OUT)
