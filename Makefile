# tablekeep build, lint and test entry points. `make test` is what CI runs
# (.ci/run): it installs the local tools, starts the local stack, runs every
# Go test against it and stops the stack again.

SHELL := /bin/bash
GO    ?= go

GOBIN_DIR := $(shell $(GO) env GOBIN)
ifeq ($(GOBIN_DIR),)
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin
endif
export PATH := $(GOBIN_DIR):$(PATH)

VERSITYGW_VERSION := v1.8.0
RIE_VERSION       := v0.0.0-20261030222936-bef5c4ba774d

# Stack used by `make stack-up` / `make stack-down`. `make test` uses its own
# directory under .stack/ so it never touches a stack you started by hand or a
# concurrent `make test`.
STACK_DIR ?= $(CURDIR)/.stack

.PHONY: all tools build lint stack-up stack-down test demo bench bench-lance bench-lance-throughput fuzz
.PHONY: lambda-local cfn-lint aws-resources invoke drain sam-env build-CompactorFunction build-CleanerFunction build-SweeperFunction

all: build

## tools: install versitygw and aws-lambda-rie, node/npm and chromium (skipped when present); check moto_server, cfn-lint.
tools:
	@if command -v versitygw >/dev/null; then echo "tools: versitygw present ($$(command -v versitygw))"; \
	else echo "tools: installing versitygw $(VERSITYGW_VERSION) into $(GOBIN_DIR) (takes ~2 min)"; \
	  $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION); fi
	@if command -v aws-lambda-rie >/dev/null; then echo "tools: aws-lambda-rie present ($$(command -v aws-lambda-rie))"; \
	else echo "tools: installing aws-lambda-rie $(RIE_VERSION) into $(GOBIN_DIR)"; \
	  $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION); fi
	@command -v moto_server >/dev/null || { echo "tools: moto_server not found: pip install 'moto[server]'" >&2; exit 1; }
	@command -v aws >/dev/null || { echo "tools: aws CLI not found: pip install awscli" >&2; exit 1; }
	@{ command -v node && command -v npm; } >/dev/null || { echo "tools: installing nodejs and npm (shared/lance tests run LanceDB)"; \
	  apt-get update -qq && apt-get install -y -qq nodejs npm; } || { echo "tools: node/npm not found: apt-get install nodejs npm" >&2; exit 1; }
	@command -v chromium >/dev/null || { echo "tools: installing chromium (the status page test renders it headless)"; \
	  apt-get update -qq && apt-get install -y -qq chromium; } || { echo "tools: chromium not found: apt-get install chromium" >&2; exit 1; }
	@command -v cfn-lint >/dev/null || echo "tools: warning: cfn-lint not found (pip install cfn-lint); needed to check SAM templates" >&2

## build: compile every package, and bin/tablekeep once ./cmd/tablekeep exists.
# The CLI's --version names the commit even with GOFLAGS=-buildvcs=false.
VERSION_STAMP = $(shell c="$$(git rev-parse --short=12 HEAD 2>/dev/null)" && \
	d="$$(git diff --quiet HEAD 2>/dev/null || echo +dirty)" && \
	echo "commit $$c$$d, $$(git log -1 --format=%cI HEAD)")
build:
	$(GO) build ./...
ifneq ($(wildcard cmd/tablekeep/*.go),)
	$(GO) build -ldflags "-X 'github.com/tablekeep/tablekeep/shared/cli.buildStamp=$(VERSION_STAMP)'" -o bin/tablekeep ./cmd/tablekeep
endif

## lint: gofmt and go vet.
lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt: these files need formatting (gofmt -w):"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## stack-up / stack-down: local versitygw + moto_server; then `source .stack/env`.
stack-up:
	@STACK_DIR="$(STACK_DIR)" infra/stack-up.sh

stack-down:
	@STACK_DIR="$(STACK_DIR)" infra/stack-down.sh

## test: tools, a private stack, all tests; the stack is stopped even on failure
## or Ctrl-C, and the test exit code is kept. Its directory is removed on success.
test: tools cfn-lint fuzz
	@dir="$(CURDIR)/.stack/test-$$$$"; \
	cleanup() { STACK_DIR="$$dir" infra/stack-down.sh; }; \
	trap cleanup EXIT; trap 'exit 130' INT TERM; \
	STACK_DIR="$$dir" infra/stack-up.sh || exit 1; \
	set +e; \
	( set -a; . "$$dir/env"; set +a; $(GO) test -count=1 -timeout 15m ./... ); rc=$$?; \
	cleanup; trap - EXIT; \
	if [ $$rc -eq 0 ]; then rm -rf "$$dir"; else echo "make test: FAILED (exit $$rc); stack logs kept in $$dir" >&2; fi; \
	exit $$rc

## fuzz: run each fuzz target for FUZZTIME (part of `make test`; seeds in
## testdata/fuzz/<Target>/; a failure leaves the crashing input there).
## A count, not a duration: go1.26's fuzz coordinator can report a spurious
## "context deadline exceeded" when a duration ends while a worker is busy
## (golang/go#75804, fixed in go1.27); it failed a CI run on a loaded machine.
## 20000 executions take ~5 s a target here.
FUZZTIME ?= 20000x
FUZZ_TARGETS := FuzzManifestDecode:./shared/table FuzzChangeDecode:./shared/table \
	FuzzDeletionDecode:./shared/table FuzzDecodeRangeMessage:./shared/maintenance \
	FuzzParseScheduled:./shared/awsfn FuzzParseSQS:./shared/awsfn FuzzCleanEvent:./shared/awsfn \
	FuzzCompactionQueueBody:./shared/awsfn FuzzLanceManifest:./shared/lance \
	FuzzRewriteManifest:./shared/lance FuzzParse:./shared/lance/lancefile FuzzDecodeMerge:./shared/lance/lanceenc
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  name=$${t%%:*}; pkg=$${t#*:}; echo "fuzz: $$name ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg > /tmp/tablekeep-fuzz-$$$$.log 2>&1 || \
	    { tail -30 /tmp/tablekeep-fuzz-$$$$.log; rm -f /tmp/tablekeep-fuzz-$$$$.log; exit 1; }; \
	  tail -1 /tmp/tablekeep-fuzz-$$$$.log; done; rm -f /tmp/tablekeep-fuzz-$$$$.log

## demo: registry churn on a local table (no services); DEMO_ARGS="--ops 5000 --writers 8".
demo:
	$(GO) run ./cmd/tkdemo $(DEMO_ARGS)

## bench: one run of cmd/tkbench writes docs/benchmarks.md and docs/benchmarks-churn.png
## (under ~10 min on 2 cores); BENCH_ARGS="-churn-ops 3000 -scales 10,1000,5000" to scale,
## BENCH_ARGS=-quick for a seconds-long smoke run. The go test benchmarks stay runnable
## by hand (see shared/*/bench_test.go). Then bench-lance-throughput and bench-lance.
bench:
	$(GO) run ./cmd/tkbench -docs docs $(BENCH_ARGS)
	$(MAKE) bench-lance-throughput
	$(MAKE) bench-lance

## bench-lance-throughput: one-row upserts, tablekeep (format 3 and 2) against LanceDB's
## mergeInsert, both on versitygw behind the S3-latency fault proxy, in one run
## (BenchmarkUpsertThroughputS3; LANCE_THROUGHPUT_UPSERTS, default 100), written into
## docs/benchmarks.md between the lance-throughput-bench markers. Starts a private stack
## (as make test) and stops it.
bench-lance-throughput: tools
	@dir="$(CURDIR)/.stack/bench-$$$$"; \
	cleanup() { STACK_DIR="$$dir" infra/stack-down.sh; }; \
	trap cleanup EXIT; trap 'exit 130' INT TERM; \
	STACK_DIR="$$dir" infra/stack-up.sh || exit 1; \
	set +e; \
	( set -a; . "$$dir/env"; set +a; LANCE_THROUGHPUT_DOC=$(CURDIR)/docs/benchmarks.md $(GO) test -count=1 -run '^$$' -bench 'BenchmarkUpsertThroughputS3$$' -benchtime 1x -timeout $(LANCE_BENCH_TIMEOUT) ./shared/lance/ ); rc=$$?; \
	cleanup; trap - EXIT; \
	if [ $$rc -eq 0 ]; then rm -rf "$$dir"; fi; \
	exit $$rc

## bench-lance: the Lance compaction figures (BenchmarkLanceCompaction): LanceDB
## builds LANCE_BENCH_ROWS rows (default 10000) + a btree index + tags +
## LANCE_BENCH_UPSERTS single-row upserts (default 2000, ~4 min); then tablekeep's
## compaction against LanceDB's optimize() side by side, at S3 latency (versitygw
## behind the latency proxy, every request counted) and on local disk; written into
## docs/lance.md between the lance-compaction-bench markers; and the local-disk
## maintenance pass (BenchmarkLancePass: 1,000 upserts, ~2 min; lance-pass-bench markers). It starts a private
## stack (.stack/bench-lance-<pid>) and stops it, even on failure or Ctrl-C.
LANCE_BENCH_TIMEOUT ?= 60m
bench-lance:
	@dir="$(CURDIR)/.stack/bench-lance-$$$$"; \
	cleanup() { STACK_DIR="$$dir" infra/stack-down.sh; }; \
	trap cleanup EXIT; trap 'exit 130' INT TERM; \
	STACK_DIR="$$dir" infra/stack-up.sh || exit 1; \
	set +e; \
	( set -a; . "$$dir/env"; set +a; LANCE_BENCH_DOC=$(CURDIR)/docs/lance.md $(GO) test -count=1 -run '^$$' \
	  -bench 'BenchmarkLanceCompaction$$|BenchmarkLancePass$$' -benchtime 1x -timeout $(LANCE_BENCH_TIMEOUT) ./shared/lance/ ); rc=$$?; \
	cleanup; trap - EXIT; \
	if [ $$rc -eq 0 ]; then rm -rf "$$dir"; else echo "make bench-lance: FAILED (exit $$rc); stack logs kept in $$dir" >&2; fi; \
	exit $$rc

## Lambda functions (docs/aws.md). SAM's `BuildMethod: makefile` runs
## build-<LogicalId> with ARTIFACTS_DIR set. The three functions run one
## bootstrap (functions/tablekeep; TABLEKEEP_FUNCTION, set per function by
## the template, picks the role): the first target compiles it, the others
## find it in the Go build cache and only link. samconfig.toml has sam build
## work in the source tree (build_in_source), so nothing is copied.
LAMBDA_ARCH    ?= arm64
LAMBDA_GOFLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w' -buildvcs=false
lambda_build = GOOS=linux GOARCH=$(1) CGO_ENABLED=0 $(GO) build $(LAMBDA_GOFLAGS) -o $(2)/bootstrap ./functions/tablekeep

build-CompactorFunction build-CleanerFunction build-SweeperFunction:
	@test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set (sam build sets it)" >&2; exit 1; }
	$(call lambda_build,$(LAMBDA_ARCH),$(ARTIFACTS_DIR))

## lambda-local: the host-arch bootstrap in bin/lambda/bootstrap (set
## TABLEKEEP_FUNCTION to run it as one function; make invoke does).
lambda-local:
	$(call lambda_build,$$($(GO) env GOARCH),bin/lambda)
	@echo "built bin/lambda/bootstrap"

## cfn-lint: check the SAM template offline.
cfn-lint:
	@command -v cfn-lint >/dev/null || { echo "cfn-lint not found: pip install cfn-lint (needed to check template.yaml)" >&2; exit 1; }
	cfn-lint template.yaml

## invoke: one function under aws-lambda-rie against the local stack, as its
## own role: make invoke FN=compactor EVENT=events/scheduled.json (needs
## make stack-up aws-resources; CLOCK_OFFSET=2h for the TEST-ONLY offset).
invoke:
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=compactor|cleaner|sweeper EVENT=events/<file>.json" >&2; exit 2; }
	@STACK_DIR="$(STACK_DIR)" infra/invoke.sh "$(FN)" "$(EVENT)"

## drain: the local cleanup queue's messages as SQS events to the cleaner
## (aws-lambda-rie), deleting what it acknowledged, until none is visible.
drain:
	@STACK_DIR="$(STACK_DIR)" infra/invoke.sh cleaner --drain

## sam-env: $(STACK_DIR)/sam-env.json for sam local invoke --env-vars (local stack only).
sam-env:
	@STACK_DIR="$(STACK_DIR)" infra/sam-env.sh

## aws-resources: warehouse bucket, lock table and queues on the running local
## stack (STACK_DIR); writes $(STACK_DIR)/aws-env for the functions.
aws-resources:
	@STACK_DIR="$(STACK_DIR)" infra/aws-resources.sh
