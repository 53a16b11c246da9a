# sbx: one static binary. `make` builds ./sbx; `make test` runs every test.
GO      ?= go
# cgo links libseccomp statically (Debian's libseccomp.a); netgo/osusergo
# keep glibc's NSS, which cannot be linked statically, out of the binary.
TAGS    := netgo,osusergo,urfave_cli_no_docs
OUT     ?= sbx
LDFLAGS := -s -w -linkmode external -extldflags -static
export CGO_ENABLED := 1

LIBSECCOMP_A := $(firstword $(wildcard /usr/lib/*/libseccomp.a /usr/lib/libseccomp.a /usr/lib64/libseccomp.a))

.PHONY: all sbx deps test unit integration vet bench clean

all: sbx

sbx: deps
	$(GO) build -trimpath -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(OUT) .

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

vet:
	$(GO) vet -tags integration ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting" >&2; exit 1; }

unit: deps
	$(GO) test ./...

# Integration tests build ./sbx and run real payloads from testdata/, as
# root and as uid 65534 (setpriv).
integration: sbx
	$(GO) test -tags integration -count=1 -timeout 20m ./tests/...

test: vet unit integration

bench: sbx
	./bench/bench.sh

clean:
	rm -f sbx
