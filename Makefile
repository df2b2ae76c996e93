# connector-mcp developer targets. `make help` lists them.
#
# Tools and control-plane binaries are built from the Go module proxy into a versioned cache outside
# the repository (CONNECTOR_MCP_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/connector-mcp) and
# reused on later runs; see docs/development.md.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
# Packages to test/vet/lint; override to narrow, e.g. `make test PKGS=./test/envtest/...`.
PKGS ?= ./...
# Extra flags for go test, e.g. `make test TESTFLAGS='-run TestCRD -v'`.
TESTFLAGS ?=
# go test -count for benchmarks; use >= 6 when comparing with benchstat.
BENCH_COUNT ?= 1
BENCH_OUT ?= bench.out
# go test -timeout for `make test`: go test's 10-minute default is too short for the envtest package
# from a cold build cache on a loaded 2-core machine.
TEST_TIMEOUT ?= 40m
# go test -timeout for benchmarks: the envtest scale stories (1,000 and 5,000 deployments) run long.
BENCH_TIMEOUT ?= 60m

# Tool paths resolve lazily and once (installing the tool on first use), so `make help` builds
# nothing and a recipe that names a tool twice asks hack/tools.sh once.
CONTROLLER_GEN = $(eval CONTROLLER_GEN := $$(shell hack/tools.sh --path controller-gen))$(CONTROLLER_GEN)
GOLANGCI_LINT = $(eval GOLANGCI_LINT := $$(shell hack/tools.sh --path golangci-lint))$(GOLANGCI_LINT)
ACTIONLINT = $(eval ACTIONLINT := $$(shell hack/tools.sh --path actionlint))$(ACTIONLINT)
# The control-plane bin dir (kube-apiserver, etcd, kubectl); built on first use, reused after.
ENVTEST_ASSETS = $$(hack/control-plane.sh)

CRD_DIR := config/crd/bases

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs (config/crd/bases, copied to the chart), the manager and gateway ClusterRoles, docs/crd-reference.md.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=$(CRD_DIR)
	$(GO) run ./hack/crdref -crd-dir $(CRD_DIR) -out docs/crd-reference.md
	cp $(CRD_DIR)/*.yaml charts/connector-mcp/crds/
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./internal/controllers/... output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=gateway-role paths=./internal/gateway/... output:rbac:artifacts:config=config/gateway/rbac

.PHONY: generate
generate: ## Generate deepcopy methods (zz_generated.deepcopy.go) for api/.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: fmt
fmt: ## Format Go code with gofmt -s.
	git ls-files -z --cached --others --exclude-standard '*.go' | while IFS= read -r -d '' f; do if [[ -f "$$f" ]]; then printf '%s\0' "$$f"; fi; done | xargs -0 -r gofmt -s -w

.PHONY: vet
vet: ## Run go vet.
	$(GO) vet $(PKGS)

.PHONY: lint
lint: ## Run golangci-lint (config: .golangci.yml), actionlint on the workflows and shellcheck on the scripts.
	$(GOLANGCI_LINT) run --allow-serial-runners $(PKGS)
	$(ACTIONLINT) -shellcheck= .github/workflows/*.yaml docs/examples/*.yaml
	@if command -v shellcheck >/dev/null; then echo "shellcheck hack/*.sh .ci/run"; shellcheck hack/*.sh .ci/run; \
	else echo "lint: shellcheck not installed (Debian: apt-get install shellcheck), shell scripts not linted"; fi

.PHONY: tidy
tidy: ## Run go mod tidy.
	$(GO) mod tidy

.PHONY: verify
verify: manifests generate fmt tidy vet lint ## Regenerate, format, vet, lint; fail if the tree is dirty.
	@if [[ -n "$$(git status --porcelain)" ]]; then \
	  echo "verify: the tree is dirty after codegen/fmt/tidy:"; git status --porcelain; git --no-pager diff --stat; exit 1; \
	fi
	@echo "verify: clean"

##@ Build

# The version and commit `mcpctl version` reports (ldflags -X; docs/cli.md).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS_VERSION = -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build
build: ## Build all packages and the binaries into bin/.
	$(GO) build ./...
	$(GO) build -ldflags "$(LDFLAGS_VERSION)" -o bin/ ./cmd/...

# `make image`: registry/repository to push to (plain HTTP only for loopback registries), optional tag.
IMAGE_REPO ?=
IMAGE_TAG ?=
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
# Also write the image's SPDX SBOM to this file (the release attests it with cosign).
IMAGE_SBOM_OUT ?=

.PHONY: image
image: ## Build the connector-mcp image (no Docker; reproducible), push to IMAGE_REPO with its SBOM, print the digest.
	@if [[ -z "$(IMAGE_REPO)" ]]; then echo "image: set IMAGE_REPO, e.g. make image IMAGE_REPO=127.0.0.1:5000/connector-mcp"; exit 2; fi
	$(GO) run ./hack/image --repo "$(IMAGE_REPO)" --tag "$(IMAGE_TAG)" --platforms "$(IMAGE_PLATFORMS)" $(if $(IMAGE_SBOM_OUT),--sbom-out "$(IMAGE_SBOM_OUT)")

# `make dist`: where mcpctl's release binaries go, and for which platforms.
DIST_DIR ?= dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# `make chart-package`/`chart-push`: the chart's version (default: VERSION without its "v") and
# the OCI repository it is pushed to, e.g. ghcr.io/b10x/charts.
CHART_VERSION ?= $(patsubst v%,%,$(VERSION))
CHART_REPO ?=
HELM = $(eval HELM := $$(shell hack/tools.sh --path helm))$(HELM)

.PHONY: dist
dist: ## Cross-build mcpctl (linux/darwin x amd64/arm64) into DIST_DIR with SHA256SUMS.
	hack/dist.sh "$(DIST_DIR)" "$(VERSION)" "$(COMMIT)" $(DIST_PLATFORMS)

.PHONY: chart-repo-set
chart-repo-set:
	@if [[ -z "$(CHART_REPO)" ]]; then echo "chart-push: set CHART_REPO, e.g. make chart-push CHART_REPO=ghcr.io/b10x/charts"; exit 2; fi

.PHONY: chart-package
chart-package: ## Package the chart as DIST_DIR/connector-mcp-CHART_VERSION.tgz (appVersion VERSION).
	$(HELM) package charts/connector-mcp --version "$(CHART_VERSION)" --app-version "$(VERSION)" -d "$(DIST_DIR)"

.PHONY: chart-push
chart-push: chart-repo-set chart-package ## Push the packaged chart to oci://CHART_REPO; prints the pushed digest.
	$(HELM) push $(if $(filter 127.0.0.1:% localhost:%,$(CHART_REPO)),--plain-http) "$(DIST_DIR)/connector-mcp-$(CHART_VERSION).tgz" "oci://$(CHART_REPO)" 2>&1 | tee "$(DIST_DIR)/chart-push.log"
	@sed -n 's/^Digest: //p' "$(DIST_DIR)/chart-push.log"

##@ Test

.PHONY: envtest-bins
envtest-bins: ## Build (or reuse) kube-apiserver, etcd and kubectl; prints their directory.
	hack/control-plane.sh

.PHONY: test
test: ## Unit + envtest suites with -race (real kube-apiserver/etcd), plus MCP conformance.
	bash hack/conformance.sh
	bash hack/gateway-conformance.sh
	bash hack/serve-conformance.sh
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(TESTFLAGS) $(PKGS)

# `make e2e`: the real-node suite's timeout (cold image builds on a loaded 2-core machine).
E2E_TIMEOUT ?= 45m
NODE_BINS = kube-controller-manager kube-scheduler kubelet kube-proxy

.PHONY: e2e
e2e: ## Real node (kubelet, containerd, kube-proxy in a network namespace): make image, helm install, Pods Ready, TLS rotation, uninstall; restores the machine. Root.
	bash hack/node-deps.sh
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh $(NODE_BINS))" $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./test/e2e/

.PHONY: conformance
conformance: ## Run the MCP conformance suite against mcpclient (hack/conformance.sh).
	bash hack/conformance.sh

.PHONY: gateway-conformance
gateway-conformance: ## Run the MCP conformance suite's server side against the gateway (hack/gateway-conformance.sh).
	bash hack/gateway-conformance.sh

.PHONY: serve-conformance
serve-conformance: ## Run the MCP conformance suite's server side against mcpctl serve over HTTP (hack/serve-conformance.sh).
	bash hack/serve-conformance.sh

.PHONY: bench
bench: ## Run benchmarks (-benchmem, one package at a time) and write $(BENCH_OUT) for benchstat.
	KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test -p 1 -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) -timeout $(BENCH_TIMEOUT) $(PKGS) | tee $(BENCH_OUT)
	@echo "bench: figures in $(BENCH_OUT); compare runs with: go run golang.org/x/perf/cmd/benchstat@latest old.txt $(BENCH_OUT)"

.PHONY: bench-scale
bench-scale: ## Time 10,000 ServiceDeployments to all-Ready (envtest; long) into bench-scale.out.
	BENCH_DEPLOYMENTS=10000 KUBEBUILDER_ASSETS="$(ENVTEST_ASSETS)" $(GO) test -run '^$$' -bench 'BenchmarkStoryActivateDeployments$$' -benchtime 1x -timeout 60m ./test/envtest/ | tee bench-scale.out

##@ Tools and demo

.PHONY: tools
tools: ## Install controller-gen, kustomize, helm, golangci-lint into the tool cache.
	hack/tools.sh

.PHONY: quickstart
quickstart: ## Local demo: control plane, registry, sample server; review, sign, activate; drift refused; clean up.
	$(GO) build -o bin/quickstart ./hack/quickstart
	bin/quickstart
