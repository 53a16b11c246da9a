# sbx: one static binary. `make` builds ./sbx; `make test` runs every test.
GO      ?= go
# cgo links libseccomp statically (Debian's libseccomp.a); netgo/osusergo
# keep glibc's NSS, which cannot be linked statically, out of the binary.
TAGS    := netgo,osusergo,urfave_cli_no_docs,sbx_precompiled
OUT     ?= sbx
# The version and commit `sbx --version`, the Result, the audit line and
# doctor report. Without git (a tarball), both stay empty and sbx falls
# back to what `go build` recorded, else "dev" (internal/version).
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSPKG := github.com/sbx-sandbox/sbx/internal/version
LDFLAGS := -s -w -linkmode external -extldflags -static \
	-X $(VERSPKG).version=$(VERSION) -X $(VERSPKG).commit=$(COMMIT)
export CGO_ENABLED := 1

# SHORTEXP: the GOEXPERIMENT of the two binaries that live for one run,
# sbx-init and the lean sbx of `sbx exec` (not the full one, whose `sbx
# serve` lives for days): the Go 1.25 garbage collector instead of Green
# Tea. The init never collects and the supervisor seldom (docs/DESIGN.md,
# "The cost of a page"), and Green Tea's inline mark bits touch the last
# page of every small-object span as it is made
# (runtime.(*spanInlineMarkBits).init), one more page fault per span:
# 60-80 per run, each ~8-12 µs on the dev VM (issue 13). Go 1.26
# still takes the opt-out; a Go without it says "unknown GOEXPERIMENT",
# and then, or when GOEXPERIMENT is set already, it is left as it is.
SHORTEXP := $(if $(GOEXPERIMENT),$(GOEXPERIMENT),$(shell GOEXPERIMENT=nogreenteagc $(GO) env GOEXPERIMENT 2>/dev/null))
# INITEXP: sbx-init's, SHORTEXP and the heap at Go's fixed base
# (norandomizedheapbase64). Go 1.26 starts the heap at a random page of
# its first 4 MiB, and the huge page a one-shot init backs its heap with
# (internal/leanexec) then holds only part of what the init allocates:
# 50 more faults per run, ~0.7 ms of CPU on the dev VM (docs/DESIGN.md,
# "The init's heap at a fixed base"). Go randomizes the base against
# exploits "when using cgo" (the Go 1.26 release notes); sbx-init has no
# cgo and, static and not PIE, keeps its data, bss and the runtime's
# pointers into its heap at fixed addresses anyway. The lean sbx, which
# links C, keeps the random base. A Go without the opt-out (golang/go#80392
# proposes its removal) builds sbx-init with SHORTEXP; a GOEXPERIMENT the
# user set is used for both, as is.
INITEXP := $(if $(GOEXPERIMENT),$(GOEXPERIMENT),$(or $(shell GOEXPERIMENT=nogreenteagc,norandomizedheapbase64 $(GO) env GOEXPERIMENT 2>/dev/null),$(SHORTEXP)))

LIBSECCOMP_A := $(firstword $(wildcard /usr/lib/*/libseccomp.a /usr/lib/libseccomp.a /usr/lib64/libseccomp.a))

# make install: the binary, the man page and the completions, below
# $(DESTDIR)$(PREFIX) (DESTDIR for packaging: make install DESTDIR=/tmp/pkg).
PREFIX  ?= /usr/local
DESTDIR ?=
DOCDIR  ?= build/docs

.PHONY: all sbx deps precompiled test unit integration test-python race-integration vet bench vmtest clean docs install image-data

all: sbx

# sbx embeds sbx-init (internal/initbin), the sandbox's init as a static
# binary of its own, built first: no cgo, no libseccomp (-tags
# sbx_init_only leaves the supervisor's compile out), stripped. Each
# sandbox then starts that instead of all of sbx again (issue 13).
INITBIN := internal/initbin/sbx-init.bin

#
# Then package main twice (internal/fullbin, the inverse layout): the full
# sbx, every command, into internal/fullbin/sbx-full.bin, and the lean
# sbx that is installed (-tags sbx_lean: no serve, no prometheus, no
# image support), which embeds it and execs it from a sealed memfd for
# `sbx serve`, `sbx image` and a run on an image. Both are built with the
# same flags and version.
FULLBIN := internal/fullbin/sbx-full.bin

sbx: deps precompiled
	CGO_ENABLED=0 GOEXPERIMENT=$(INITEXP) $(GO) build -trimpath -tags netgo,osusergo,sbx_init_only -ldflags '-s -w' -o $(INITBIN).$$$$.tmp ./cmd/sbx-init && \
		mv $(INITBIN).$$$$.tmp $(INITBIN)
	$(GO) build -trimpath -tags $(TAGS),sbx_embedinit -ldflags '$(LDFLAGS)' -o $(FULLBIN).$$$$.tmp . && \
		mv $(FULLBIN).$$$$.tmp $(FULLBIN)
	GOEXPERIMENT=$(SHORTEXP) $(GO) build -trimpath -tags $(TAGS),sbx_embedinit,sbx_lean,sbx_embedfull -ldflags '$(LDFLAGS)' -o $(OUT) .

# precompiled: the built-in seccomp policies compiled once, with the
# libseccomp this build links, into seccomp/precompiled_gen_$GOARCH.go
# (seccomp/precompiled.go says why; -tags sbx_precompiled embeds it). It is
# regenerated each time (a second or two), so it is never stale.
precompiled: deps
	$(GO) test -count=1 -run '^TestPrecompiledFilters$$' ./seccomp -update >/dev/null

# libseccomp-dev brings libseccomp.a and seccomp.h. As root, install it;
# otherwise say exactly what to install.
deps:
ifeq ($(LIBSECCOMP_A),)
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "make: installing libseccomp-dev (apt-get)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q libseccomp-dev || \
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libseccomp-dev; }; \
	else \
		echo "make: libseccomp.a not found; install it first: sudo apt-get install libseccomp-dev" >&2; exit 1; \
	fi
endif

# Each phase of make test says what it runs; the integration phase prints
# a line per test as it ends, and make test ends with one line: what ran
# as root, as uid 65534, and (make vmtest) in the VM.
SUMMARY := build/summary
TESTSUM := $(GO) run $(CURDIR)/internal/testsummary

vet:
	@echo "make: vet: go vet -tags integration ./... and gofmt -l"
	$(GO) vet -tags integration ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting" >&2; exit 1; }

# -race: the supervisor is concurrent (status reader, attach, compile,
# proxy); CGO is on anyway for libseccomp.
unit: deps precompiled
	@echo "make: unit: go test -race -tags sbx_precompiled ./... (every package's unit tests, as $$(id -un))"
	$(GO) test -race -tags sbx_precompiled ./...
	@echo "make: unit: the lean build's hand-offs (go test -tags sbx_lean; the other tests are the full build's)"
	$(GO) test -tags sbx_precompiled,sbx_lean -run '^(TestHandOff|TestHandedOff|TestLeanBuild)' . ./engine

# Integration tests build ./sbx and run real payloads from testdata/, as
# root and as uid 65534 (setpriv). RUN='TestA|TestB' runs only those.
integration: sbx
	@echo "make: integration: tests/ on a fresh build of sbx, each test as root and as uid 65534 when make runs as root, else as $$(id -un); 7 to 13 minutes on 2 cores, by load (the slowest tests are named at the end)"
	@mkdir -p $(dir $(SUMMARY))
	$(TESTSUM) -label integration -o $(SUMMARY)-integration -- $(GO) test -json -tags integration -count=1 -p 1 -timeout 20m $(if $(RUN),-run '$(RUN)') ./tests/...

# test-python: the Python client's pytest suite (clients/python/tests)
# against a real `sbx serve` each test starts on 127.0.0.1, and the local
# binary; as root, then as uid 65534 (setpriv) when make runs as root.
# Debian's python3 (python3-pytest, python3-httpx), not a pyenv's. Each
# run's last line ("N passed, M skipped") goes into make test's summary.
PYTHON ?= $(firstword $(wildcard /usr/bin/python3) python3)
PYSUM   = $(CURDIR)/$(SUMMARY)-python
# $(call pytest_as,WRAPPER,LABEL): pytest's own exit status, its output
# both on the terminal and in $(PYSUM)-LABEL.
define pytest_as
	cd clients/python && { $(1) env SBX=$(CURDIR)/$(OUT) PYTHONDONTWRITEBYTECODE=1 $(PYTHON) -m pytest -q -rs -p no:cacheprovider tests; echo $$? > $(PYSUM)-rc; } | tee $(PYSUM)-$(2); exit $$(cat $(PYSUM)-rc)
endef
test-python: sbx
	@echo "make: test-python: clients/python's pytest against sbx serve and the local sbx, as $$(id -un)$$([ "$$(id -u)" = 0 ] && echo ', then as uid 65534')"
	@$(PYTHON) -c 'import pytest, httpx' 2>/dev/null || { echo "make: test-python needs pytest and httpx for $(PYTHON): apt-get install python3-pytest python3-httpx" >&2; exit 1; }
	@mkdir -p $(dir $(SUMMARY))
	@rm -f $(PYSUM)-*
	$(call pytest_as,,$$(id -un))
	@if [ "$$(id -u)" = 0 ]; then echo "make: test-python: as uid 65534"; fi
	if [ "$$(id -u)" = 0 ]; then $(call pytest_as,setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp,uid65534); fi
	@for f in $(PYSUM)-$$(id -un) $(PYSUM)-uid65534; do [ -f $$f ] && printf '%s as %s; ' "$$(tail -n 1 $$f | sed 's/ in [0-9.]*s.*//; s/=//g; s/^ *//')" "$${f##*-}"; done | sed 's/; $$//; s/^/python client: /' > $(PYSUM)

test: vet unit integration test-python
	@echo "make test: vet and unit passed; $$(cat $(SUMMARY)-integration); $$(cat $(SUMMARY)-python); VM: not run by make test (make vmtest)"

bench: sbx
	./bench/bench.sh

# vmtest: the limits' integration tests (and the cgroup package's) on a
# pure cgroup v2 kernel, booted under QEMU by the shared run-in-vm.sh: as
# root, and as uid 1000 in a delegated subtree where each sbx gets a cgroup
# of its own (tests/vm/own-cgroup.sh, like systemd-run --scope). Binaries
# are built here; the VM shares them and the checkout read-only.
VMTEST  ?= $(firstword $(wildcard $(CURDIR)/../shared/vmtest/run-in-vm.sh /work/shared/vmtest/run-in-vm.sh))
# VMDIR and RACEDIR are per make (its pid, $$PPID of the shell), so that
# two runs at once (a CI dry run beside a hand-run make vmtest) do not
# remove each other's binaries; each run removes its own, and those of
# runs whose make is gone (a failed test stops the recipe before its rm).
MAKEPID := $(shell echo $$PPID)
rmstale = for d in $(1).*; do [ -d "$$d" ] && ! kill -0 "$${d\#\#*.}" 2>/dev/null && rm -rf "$$d"; done; true
VMDIR   ?= /var/tmp/sbx-vmtest.$(MAKEPID)
VMTESTS ?= TestHello|TestInitClonedWithoutFullFork|TestUserNSOwnedByRunUID|TestResultContract|TestIsolation|TestMemoryLimit|TestForkBombContained|TestCPUTimeLimit|TestCPUTimeIsTotal|TestCPUTimeCountsShortLived|TestCPUTimeCountsThreadForks|TestCPUTimeCountsUnwaitedChildren|TestPidsRlimitPerSandbox|TestWallTimeout|TestCPUQuota|TestDoctorTellsTheTruth|TestRequireCgroup|TestLayersAndDegradedWarning|TestSandboxDropsRealtimeScheduling|TestZZNothingLeftBehind
# race-integration: a race-built sbx (supervisor and init alike) through
# the integration tests that drive its goroutines hardest: the timeline
# (--debug-timings), the proxy and the DNS stub, signals, the wall timer,
# the report, the CPU poll, the denial server. GORACE halts sbx at the first
# race, which fails the test. Dynamic: -race does not link statically.
# It is the full sbx, not the lean one of make sbx: the races are in the
# code both share (and serve's), not in which binary runs it.
RACEDIR   ?= /var/tmp/sbx-race.$(MAKEPID)
RACETESTS ?= TestHello|TestDebugTimingsShowEveryStep|TestNetworkCapsAndAbuse|TestEgressWithoutProxyVariables|TestWallTimeout|TestSignalsForwarded|TestOutputHardlinks|TestCPUTimeIsTotal|TestDenialFloodDoesNotHang|TestServeStreamAndAdmission|TestServeDrain
race-integration: deps precompiled
	@echo "make: race-integration: a -race build of sbx through $(RACETESTS)"
	$(call rmstale,/var/tmp/sbx-race)
	rm -rf $(RACEDIR) && mkdir -p $(RACEDIR) && chmod 755 $(RACEDIR)
	$(GO) build -race -trimpath -tags $(TAGS) -o $(RACEDIR)/sbx .
	SBX_BIN=$(RACEDIR)/sbx GORACE=halt_on_error=1 $(GO) test -tags integration -count=1 -p 1 -timeout 15m -run '^($(RACETESTS)|$(RACETESTS_OPS))$$' ./tests/
	rm -rf $(RACEDIR)

# sbx serve's async jobs and every endpoint (the OpenAPI check), on the
# race-built server too.
RACETESTS_OPS ?= TestOpsJobs|TestOpsOpenAPI

vmtest: deps
	@test -n "$(VMTEST)" || { echo "make vmtest: run-in-vm.sh not found; set VMTEST=/path/to/run-in-vm.sh" >&2; exit 1; }
	$(call rmstale,/var/tmp/sbx-vmtest)
	rm -rf $(VMDIR) && mkdir -p $(VMDIR) && chmod 755 $(VMDIR)
	$(MAKE) --no-print-directory sbx OUT=$(VMDIR)/sbx
	$(GO) test -c -tags integration -o $(VMDIR)/integration.test ./tests
	$(GO) test -c -o $(VMDIR)/cgroup.test ./cgroup
	cd cgroup && $(VMTEST) -r $(VMDIR) -e SBX_CGROUP_WANT=cgroup2 $(VMDIR)/cgroup.test
	# the init's clone3 CLONE_INTO_CGROUP into a cgroup of its own, which
	# the hybrid dev host cannot check (nsjail/spawn_cgo_linux_test.go)
	$(GO) test -c -o $(VMDIR)/nsjail.test ./nsjail
	cd nsjail && $(VMTEST) -r $(VMDIR) $(VMDIR)/nsjail.test -test.v -test.run '^TestSpawnInit'
	@mkdir -p $(dir $(SUMMARY))
	cd tests && $(TESTSUM) -label "VM, run as root" -o $(CURDIR)/$(SUMMARY)-vm-root -- $(VMTEST) -r $(CURDIR) -r $(VMDIR) -e SBX_BIN=$(VMDIR)/sbx -e SBX_MUST_WORK=1 -e SBX_TEST_SLOWCPU=1 -e SBX_TEST_CGROUP=cgroup2 \
		$(VMDIR)/integration.test -test.v -test.run '$(VMTESTS)'
	cd tests && $(TESTSUM) -label "VM, run as uid 1000" -o $(CURDIR)/$(SUMMARY)-vm-user -- $(VMTEST) -u 1000 -r $(CURDIR) -r $(VMDIR) -e SBX_BIN=$(VMDIR)/sbx -e SBX_MUST_WORK=1 -e SBX_TEST_SLOWCPU=1 -e SBX_TEST_CGROUP=cgroup2 \
		-e SBX_TEST_DELEGATED=1 -e SBX_TEST_WRAP=$(CURDIR)/tests/vm/own-cgroup.sh \
		$(VMDIR)/integration.test -test.v -test.run '$(VMTESTS)'
	rm -rf $(VMDIR)
	@echo "make vmtest: $$(cat $(SUMMARY)-vm-root); $$(cat $(SUMMARY)-vm-user)"

# docs: the man page (sbx.1) and the bash, zsh and fish completions,
# generated from the CLI definition by the hidden `sbx gen-docs` of a
# build without urfave_cli_no_docs (the sbx binary leaves urfave/cli's
# docs out; gendocs.go). The generator binary is thrown away.
docs: deps
	$(GO) build -trimpath -tags netgo,osusergo -o $(DOCDIR)/sbx-gen-docs .
	$(DOCDIR)/sbx-gen-docs gen-docs $(DOCDIR)
	rm -f $(DOCDIR)/sbx-gen-docs

install: sbx docs
	install -D -m 0755 $(OUT) $(DESTDIR)$(PREFIX)/bin/sbx
	install -D -m 0644 $(DOCDIR)/sbx.1 $(DESTDIR)$(PREFIX)/share/man/man1/sbx.1
	install -D -m 0644 $(DOCDIR)/sbx.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sbx
	install -D -m 0644 $(DOCDIR)/_sbx $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_sbx
	install -D -m 0644 $(DOCDIR)/sbx.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/sbx.fish

# image-data: a data-science image built from Debian's own packages: a
# minimal bookworm with python3, numpy, pandas and matplotlib (scipy is not
# listed, but bookworm's python3-fonttools, which matplotlib needs, depends
# on it, and it brings python3-pythran, g++ and boost: ~1.2 GB unpacked), by
# mmdebstrap (mode auto: unshare, so rootless, unless make
# runs as root), wrapped as an OCI archive (internal/mkoci) and imported into
# the store as sbx-data (examples/data-image.toml runs on it). It downloads
# from DATA_MIRROR: CI runs it as a separate, slower step (.ci/image-data).
# The .debs are kept in DATA_CACHE (sync-in/sync-out, as mmdebstrap(1)'s
# EXAMPLES show; --skip=essential/unlink keeps them), so a second build
# downloads only what changed.
DATA_SUITE  ?= bookworm
DATA_MIRROR ?= http://deb.debian.org/debian
DATA_PKGS   ?= python3,python3-numpy,python3-pandas,python3-matplotlib,fonts-dejavu-core
DATA_OUT    ?= build/sbx-data.oci.tar
DATA_CACHE  ?= build/apt-cache
image-data: sbx
	@command -v mmdebstrap >/dev/null || { echo "make image-data: needs mmdebstrap (apt-get install mmdebstrap uidmap)" >&2; exit 1; }
	mkdir -p build $(DATA_CACHE)
	mmdebstrap --variant=apt --include=$(DATA_PKGS) --skip=essential/unlink \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
		--setup-hook='mkdir -p "$$1"/var/cache/apt/archives/' \
		--setup-hook='sync-in $(abspath $(DATA_CACHE)) /var/cache/apt/archives/' \
		--customize-hook='sync-out /var/cache/apt/archives $(abspath $(DATA_CACHE))' \
		--customize-hook='rm -rf "$$1"/var/cache/apt/* "$$1"/var/lib/apt/lists/*' \
		--format=tar $(DATA_SUITE) build/sbx-data-rootfs.tar $(DATA_MIRROR)
	$(GO) run ./internal/mkoci -name sbx-data:$(DATA_SUITE) -env PATH=/usr/local/bin:/usr/bin:/bin -env LANG=C.UTF-8 build/sbx-data-rootfs.tar $(DATA_OUT)
	rm -f build/sbx-data-rootfs.tar
	./$(OUT) image import --name sbx-data $(DATA_OUT)

clean:
	rm -rf sbx build internal/initbin/sbx-init.bin internal/fullbin/sbx-full.bin seccomp/precompiled_gen_*.go
