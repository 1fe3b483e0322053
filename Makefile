# iowarp — see README.md. `make run` mounts /iowarp (or MOUNT=dir) in the
# foreground; `make test` runs every test (and a -race and a GOMAXPROCS=1
# leg). Both install what they need.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
GO_MIN := $(shell sed -n 's/^go \([0-9.]*\).*/\1/p' go.mod)
MOUNT ?= /iowarp
ARGS ?=
BIN := bin/iowarp
TEST_TIMEOUT ?= 14m
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Every system package the project uses (build, tests, benchmarks).
APT_PACKAGES := fuse3 libfuse3-dev libhdf5-dev libnetcdf-dev hdf5-tools netcdf-bin \
	openmpi-bin libopenmpi-dev fio clang libbpf-dev python3-h5py python3-netcdf4 \
	python3-numpy python3-xarray python3-zarr attr rsync jq e2fsprogs

.PHONY: all deps go-check build run test bench lint clean

all: build

## deps: install the missing system packages (idempotent) and check Go.
deps: go-check
	@missing=""; \
	for p in $(APT_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "deps: installing$$missing"; \
		$(SUDO) apt-get update; \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	else \
		echo "deps: all $(words $(APT_PACKAGES)) system packages present"; \
	fi
	@[ -e /dev/fuse ] || $(SUDO) modprobe fuse 2>/dev/null || \
		echo "deps: warning: /dev/fuse is missing (in a container: --device /dev/fuse --cap-add SYS_ADMIN); mount tests will be skipped"

go-check:
	@command -v $(GO) >/dev/null 2>&1 || { \
		echo "deps: no Go toolchain: install Go >= $(GO_MIN) from https://go.dev/dl and put it on PATH (or GO=/path/to/go)"; exit 1; }
	@have=$$($(GO) env GOVERSION | sed 's/^go//'); \
	if [ "$$(printf '%s\n%s\n' "$(GO_MIN)" "$$have" | sort -V | head -1)" != "$(GO_MIN)" ]; then \
		echo "deps: Go $$have is older than $(GO_MIN) (go.mod); GOTOOLCHAIN=auto may fetch it, else install from https://go.dev/dl"; \
	else \
		echo "deps: Go $$have"; \
	fi

## build: bin/iowarp and bin/libiowarp.so (the LD_PRELOAD shim)
build: go-check
	$(GO) build -o $(BIN) ./cmd/iowarp
	$(GO) build -buildmode=c-shared -o bin/libiowarp.so ./adapters/posix
	rm -f bin/libiowarp.h

## run: mount iowarp on $(MOUNT) in the foreground; Ctrl-C drains and unmounts.
run: deps build
	$(SUDO) mkdir -p $(MOUNT)
	$(SUDO) $(BIN) mount $(MOUNT) $(ARGS)

## test: vet and every test (the mount tests need root and /dev/fuse), then
## a -race leg and a GOMAXPROCS=1 leg; < 15 min on 2 cores.
# 1. Every test. Each package's TestMain fails the package if its tests
#    leaked an fd or a FUSE mount (internal/leakcheck).
# 2. -race, all tests of the packages with concurrency: the pool and its
#    organizer, files (flushers, stage-in), fusefs (go-fuse serves requests
#    concurrently), runtime (workers), runtime/ipc, client: 72 s measured
#    (2 cores, warm build cache), so no -run selection is needed.
# 3. GOMAXPROCS=1 for the mount tests whose daemon is its own process
#    (shimtest, integration; the variable reaches the daemons they start):
#    a daemon with one P must neither deadlock nor starve its FUSE server.
#    fusefs is not in it: its test process serves the mount it uses, and
#    its TestMain raises GOMAXPROCS to 8 for that (go-fuse known deadlock 3).
#    The cp -a of 5000 files and 1 GiB is skipped there (125 s with one P);
#    the leg takes 78 s measured. Leg 1 took 173 s: about 6 min in all.
#    -count=1: the test cache does not key on GOMAXPROCS.
RACE_PKGS := ./bufferpool/ ./bufferpool/files/ ./fusefs/ ./runtime/ ./runtime/ipc/ ./client/
ONE_P_PKGS := ./adapters/posix/shimtest/ ./integration/
test: deps
	$(GO) vet ./...
	$(GO) test -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS)
	GOMAXPROCS=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -skip 'TestPrograms/cp_-a' $(ONE_P_PKGS)

## bench: IOR and mdtest patterns (bench/*.c, MPI), fio and a cold read, each on
## tmpfs, the mount and the mount under the shim, same run; prints ratios.
## QUICK=1 make bench: small sizes (scripts/bench.sh lists the knobs).
bench: deps build bin/ior bin/mdtest bin/loopback
	$(SUDO) $(if $(SUDO),-E) scripts/bench.sh

bin/ior bin/mdtest: bin/%: bench/%.c
	@mkdir -p bin
	mpicc -O2 -Wall -o $@ $<

# go-fuse's own loopback file system: mdtest's baseline for a FUSE door.
bin/loopback: go.mod go.sum
	@mkdir -p bin
	$(GO) build -o $@ github.com/hanwen/go-fuse/v2/example/loopback

## lint: gofmt and go vet.
lint: go-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin
