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
	python3-numpy python3-xarray python3-zarr attr acl rsync jq e2fsprogs chromium \
	python3-pip python3-setuptools python3-wheel \
	libcfitsio-dev python3-astropy libeccodes-dev python3-cfgrib python3-biopython \
	libgdal-dev gdal-bin python3-gdal \
	iproute2

# Installation layout (GNU conventions; DESTDIR is prepended to every
# path, for packaging and for the install test).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
LIBEXECDIR ?= $(PREFIX)/libexec
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
SYSCONFDIR ?= /etc
SYSTEMDDIR ?= $(LIBDIR)/systemd/system
DESTDIR ?=
INSTALL ?= install
# The Python package (python/) goes where PYTHON finds it for PREFIX.
PYTHON ?= /usr/bin/python3
PYTHONDIR ?= $(shell $(PYTHON) -c 'import sys; print("$(PREFIX)/lib/python3/dist-packages" if "$(PREFIX)" == "/usr" else "$(PREFIX)/lib/python%d.%d/dist-packages" % sys.version_info[:2])' 2>/dev/null)

# Version stamped into the binary (iowarp --version).
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo 0.1.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
# -trimpath: no build paths in the binary; -s -w: no symbol table or
# DWARF (73 MiB -> about a third; stack traces and pprof still work
# from the Go symbol tables). TRIMPATH= keeps the paths (faster
# rebuilds where the test cache holds untrimmed packages).
TRIMPATH ?= -trimpath
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GOBUILD = $(GO) build $(TRIMPATH) -ldflags "$(LDFLAGS)"

.PHONY: all deps go-check build run test bench lint clean install uninstall

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

## build: bin/iowarp, bin/libiowarp.so (the LD_PRELOAD shim) and
## bin/libiowarp_py.so (the client's C API, for python/iowarp)
build: go-check
	$(GOBUILD) -o $(BIN) ./cmd/iowarp
	$(GOBUILD) -buildmode=c-shared -o bin/libiowarp.so ./adapters/posix
	$(GOBUILD) -buildmode=c-shared -o bin/libiowarp_py.so ./adapters/capi
	rm -f bin/libiowarp.h bin/libiowarp_py.h

# Files install writes, relative to DESTDIR (uninstall removes them).
SLURM_SCRIPTS := iowarp-slurm-prolog iowarp-slurm-epilog iowarp-slurm-cluster
UNITS := iowarp.service iowarp@.service
# @BINDIR@ and friends in contrib/ files are replaced at install time.
SUBST = sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	-e 's|@LIBEXECDIR@|$(LIBEXECDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g'

## install: build, then install into $(DESTDIR)$(PREFIX) (PREFIX=/usr/local):
## the binary, lib/iowarp/libiowarp.so, systemd units, Slurm prolog/epilog,
## shell completions, man pages and $(SYSCONFDIR)/iowarp/iowarp.yaml (kept
## if it exists).
install: build
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/iowarp $(DESTDIR)$(LIBEXECDIR)/iowarp \
		$(DESTDIR)$(SYSTEMDDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(SYSCONFDIR)/iowarp \
		$(DESTDIR)$(DATADIR)/bash-completion/completions $(DESTDIR)$(DATADIR)/zsh/site-functions \
		$(DESTDIR)$(DATADIR)/fish/vendor_completions.d
	$(INSTALL) -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/iowarp
	$(INSTALL) -m 0755 bin/libiowarp.so $(DESTDIR)$(LIBDIR)/iowarp/libiowarp.so
	$(INSTALL) -m 0755 bin/libiowarp_py.so $(DESTDIR)$(LIBDIR)/iowarp/libiowarp_py.so
	@if [ -n "$(PYTHONDIR)" ] && $(PYTHON) -m pip --version >/dev/null 2>&1; then \
		echo "install: python package into $(DESTDIR)$(PYTHONDIR)"; \
		$(PYTHON) -m pip install -q --no-build-isolation --no-deps --no-index --disable-pip-version-check \
			--no-cache-dir --target $(DESTDIR)$(PYTHONDIR) ./python && rm -rf python/build python/iowarp.egg-info; \
	else echo "install: no pip for $(PYTHON) (make deps): python package not installed"; fi
	for u in $(UNITS); do \
		$(SUBST) contrib/systemd/$$u > $(DESTDIR)$(SYSTEMDDIR)/$$u; chmod 0644 $(DESTDIR)$(SYSTEMDDIR)/$$u; done
	for s in $(SLURM_SCRIPTS); do \
		$(SUBST) contrib/slurm/$$s > $(DESTDIR)$(LIBEXECDIR)/iowarp/$$s; chmod 0755 $(DESTDIR)$(LIBEXECDIR)/iowarp/$$s; done
	$(BIN) completion bash > $(DESTDIR)$(DATADIR)/bash-completion/completions/iowarp
	$(BIN) completion zsh > $(DESTDIR)$(DATADIR)/zsh/site-functions/_iowarp
	$(BIN) completion fish > $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/iowarp.fish
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) \
		$(BIN) docs man $(DESTDIR)$(MANDIR)/man1 > /dev/null
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/iowarp/iowarp.yaml ]; then \
		echo "install: keeping $(DESTDIR)$(SYSCONFDIR)/iowarp/iowarp.yaml"; \
	else \
		$(INSTALL) -m 0644 contrib/iowarp.yaml $(DESTDIR)$(SYSCONFDIR)/iowarp/iowarp.yaml; fi

## uninstall: remove what install wrote (the config only if unchanged).
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/iowarp $(DESTDIR)$(LIBDIR)/iowarp/libiowarp.so $(DESTDIR)$(LIBDIR)/iowarp/libiowarp_py.so
	if [ -n "$(PYTHONDIR)" ]; then rm -rf $(DESTDIR)$(PYTHONDIR)/iowarp $(DESTDIR)$(PYTHONDIR)/iowarp-*.dist-info; \
		rmdir $(DESTDIR)$(PYTHONDIR) 2>/dev/null || true; fi
	rm -f $(addprefix $(DESTDIR)$(SYSTEMDDIR)/,$(UNITS)) $(addprefix $(DESTDIR)$(LIBEXECDIR)/iowarp/,$(SLURM_SCRIPTS))
	rm -f $(DESTDIR)$(MANDIR)/man1/iowarp.1 $(DESTDIR)$(MANDIR)/man1/iowarp-*.1
	rm -f $(DESTDIR)$(DATADIR)/bash-completion/completions/iowarp \
		$(DESTDIR)$(DATADIR)/zsh/site-functions/_iowarp $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/iowarp.fish
	@if cmp -s contrib/iowarp.yaml $(DESTDIR)$(SYSCONFDIR)/iowarp/iowarp.yaml; then \
		rm -f $(DESTDIR)$(SYSCONFDIR)/iowarp/iowarp.yaml; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/iowarp/iowarp.yaml ]; then \
		echo "uninstall: keeping the edited $(DESTDIR)$(SYSCONFDIR)/iowarp/iowarp.yaml"; fi
	rmdir $(DESTDIR)$(LIBDIR)/iowarp $(DESTDIR)$(LIBEXECDIR)/iowarp $(DESTDIR)$(SYSCONFDIR)/iowarp 2>/dev/null || true

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
	$(SUDO) $(if $(SUDO),-E) scripts/bench-trace.sh
	$(GO) test -run '^$$' -bench BenchmarkReadBackRatio -benchtime 1x ./cluster/

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
