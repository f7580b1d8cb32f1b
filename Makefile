# The two commands a newcomer types: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
DEMO   := .demo

.PHONY: install demo demo-installed image test lint bench bench-build bench-live bench-one-run bench-suite lock clean realapi realnode argocd kustomize mco cosign policycheck crcrender

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ocl-reconciler needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@

# `make demo` runs the work tree (the editable install of .venv); `make demo-installed` runs the same
# steps with the package as a user installs it: a wheel, not editable, in $(INSTALLED) beside the
# pinned runtime dependencies (requirements.lock), as the Containerfile installs it. The example
# scripts (examples/*.py) import whichever package is installed where they run.
INSTALLED := .installed
demo: install
demo: OCL = $(VENV)/bin/ocl-reconcile
demo: DEMO_PY = $(PY)
demo-installed: $(INSTALLED)/.done
demo-installed: OCL = $(INSTALLED)/bin/ocl-reconcile
demo-installed: DEMO_PY = $(INSTALLED)/bin/python

$(INSTALLED)/.done: pyproject.toml setup.py requirements.lock $(shell find reconcile manifests -type f -not -path '*/__pycache__/*')
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "ocl-reconciler needs Python >= 3.11")'
	rm -rf $(INSTALLED) && $(PYTHON) -m venv $(INSTALLED)
	$(INSTALLED)/bin/pip install --quiet --disable-pip-version-check --no-deps -r requirements.lock
	rm -rf $(INSTALLED).dist && $(INSTALLED)/bin/pip wheel --quiet --disable-pip-version-check --no-deps -w $(INSTALLED).dist .
	$(INSTALLED)/bin/pip install --quiet --disable-pip-version-check --no-deps $(INSTALLED).dist/ocl_reconciler-*.whl
	@rm -rf build $(INSTALLED).dist && touch $@

demo demo-installed:
	@rm -rf $(DEMO) && mkdir -p $(DEMO)
	@echo '### 1. diff: what a first run would do to examples/cluster.yaml (exit 1 = changes)'
	-$(OCL) diff --snapshot examples/cluster.yaml > $(DEMO)/diff.txt; \
	  grep '^=====' $(DEMO)/diff.txt; echo '   [the worker pool patch:]'; \
	  sed -n '/^===== patch .*MachineConfigPool worker/,/^=====/p' $(DEMO)/diff.txt | sed '1d;$$d'; \
	  echo '   [full diff in $(DEMO)/diff.txt]'; tail -n 1 $(DEMO)/diff.txt
	@echo; echo '### 2. run: apply it, writing the resulting cluster to $(DEMO)/run1.yaml'
	$(OCL) run --snapshot examples/cluster.yaml --write-snapshot $(DEMO)/run1.yaml
	@echo; echo '### 3. status (-o wide: the architecture of the pool'"'"'s nodes, the release'"'"'s builder image)'
	$(OCL) status -o wide --snapshot $(DEMO)/run1.yaml
	@echo; echo '### 4. a kubelet finishes the builds: worker succeeds, infra fails'
	$(DEMO_PY) examples/kubelet.py $(DEMO)/run1.yaml $(DEMO)/kubelet.yaml --pool worker=Succeeded --pool infra=Failed
	$(OCL) run --snapshot $(DEMO)/kubelet.yaml --write-snapshot $(DEMO)/run2.yaml
	$(OCL) status --snapshot $(DEMO)/run2.yaml
	@echo; echo '### 5. converged: diff shows nothing and exits 0'
	$(OCL) diff --snapshot $(DEMO)/run2.yaml && echo 'no differences'
	@echo; echo '### 6. explain: why infra stays Failed, and what would build it again'
	$(OCL) explain infra --snapshot $(DEMO)/run2.yaml | sed -n '/^decision/,$$p'
	@echo; echo '### 7. follow its advice: a rebuild token (oc annotate mcp infra ...), and this time the build succeeds'
	$(DEMO_PY) examples/annotate.py $(DEMO)/run2.yaml $(DEMO)/token.yaml infra ocl-reconciler.io/rebuild=1
	$(OCL) run --snapshot $(DEMO)/token.yaml --write-snapshot $(DEMO)/run3.yaml
	$(DEMO_PY) examples/kubelet.py $(DEMO)/run3.yaml $(DEMO)/kubelet2.yaml --pool infra=Succeeded
	$(OCL) run --snapshot $(DEMO)/kubelet2.yaml --write-snapshot $(DEMO)/run4.yaml
	@echo; echo '### 8. rollout: machineconfig hands each image to the MCO: one MachineConfig per pool, only osImageURL'
	$(DEMO_PY) examples/settings.py $(DEMO)/run4.yaml $(DEMO)/mc.yaml rollout=machineconfig
	$(OCL) run --snapshot $(DEMO)/mc.yaml --write-snapshot $(DEMO)/run5.yaml
	@echo '   [the MCO (imitated: examples/mco.py) renders them into the pools: new rendered configs, same content]'
	$(DEMO_PY) examples/mco.py $(DEMO)/run5.yaml $(DEMO)/rendered.yaml
	$(OCL) run --snapshot $(DEMO)/rendered.yaml --write-snapshot $(DEMO)/run6.yaml
	@echo '   [worker'"'"'s MachineConfig came second: infra selects worker'"'"'s MachineConfigs (OpenShift 4.18 requires it),'
	@echo '    so infra'"'"'s own had to exist first, or infra'"'"'s nodes would boot worker'"'"'s image. The MCO renders again:]'
	$(DEMO_PY) examples/mco.py $(DEMO)/run6.yaml $(DEMO)/rendered2.yaml
	$(OCL) run --snapshot $(DEMO)/rendered2.yaml --write-snapshot $(DEMO)/run7.yaml
	$(OCL) status --snapshot $(DEMO)/run7.yaml
	$(OCL) diff --snapshot $(DEMO)/run7.yaml && echo 'no differences: nothing is built again'
	@echo; echo '### 9. the same in one run: run --wait follows its changes (examples/follow.py plays the kubelet and the MCO'"'"'s'
	@echo '    render as it waits) from step 8'"'"'s snapshot: infra'"'"'s MachineConfig, then worker'"'"'s in the same run, the renders'
	@echo '    followed, both pools released: one run where step 8 took three'
	$(DEMO_PY) examples/follow.py $(DEMO)/mc.yaml $(DEMO)/followed.yaml 2>&1 | grep -E 'waiting:|done:|wait |run done'
	$(OCL) status --snapshot $(DEMO)/followed.yaml

# The product image from the Containerfile, built offline: `buildah bud --network none` installs the
# wheels of requirements.lock and requirements-build.lock (hash-checked, downloaded once into
# ~/.cache/ocl-reconciler/wheels-<hash of both>-<arch>) from a read-only /wheels. BASE_IMAGE=name@digest
# builds on another base (default: the Containerfile's UBI 9 Python 3.11); IMAGE names the result.
# runc where it is installed (crun cannot start a container where cgroups are in hybrid mode).
IMAGE ?= localhost/ocl-reconciler:dev
BASE_IMAGE ?=
WHEELS := $(HOME)/.cache/ocl-reconciler/wheels-$(shell cat requirements.lock requirements-build.lock | sha256sum | cut -c1-12)-$(shell uname -m)
image:
	@test -d $(WHEELS) || { rm -rf $(WHEELS).partial && $(PYTHON) tests/tools/lock/hashes.py wheels $(WHEELS).partial \
	  && mv $(WHEELS).partial $(WHEELS); }
	buildah bud --layers --network none $(if $(shell command -v runc),--runtime runc) \
	  --volume $(WHEELS):/wheels:ro --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/wheels \
	  $(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) -f Containerfile -t $(IMAGE) .

# The real kube-apiserver, etcd and kubectl of the realapi suite: built once from the Go modules
# pinned in tests/tools/realapi/go.mod into ~/.cache/ocl-reconciler (OCL_REALAPI_CACHE), then reused.
realapi:
	@if command -v go >/dev/null; then bash tests/tools/realapi/build.sh >/dev/null; \
	  else echo 'go is not on the PATH: the realapi suite will skip (OCL_REALAPI=require makes it fail)'; fi

# The real node's kubelet, kube-controller-manager and kube-scheduler, of the kube-apiserver's release,
# built in one `go build` into the same cache folder (tests/tools/realapi/build.sh node). The realnode
# suite also needs root and Debian's containerd, runc and containernetworking-plugins (.ci/run).
realnode: realapi
	@if command -v go >/dev/null; then bash tests/tools/realapi/build.sh node >/dev/null; \
	  else echo 'go is not on the PATH: the realnode suite will skip (OCL_REALNODE=require makes it fail)'; fi

# Argo CD's real `argocd` CLI (and its install.yaml), which judges our health checks: built once from
# the Go module pinned in tests/tools/argocd/go.mod into ~/.cache/ocl-reconciler (OCL_ARGOCD_CACHE).
argocd:
	@if command -v go >/dev/null; then bash tests/tools/argocd/build.sh >/dev/null; \
	  else echo 'go is not on the PATH: the Argo CD health tests will skip (OCL_ARGOCD=require makes them fail)'; fi

# The real `kustomize` CLI that the doc test runs (docs/admin.md's `kustomize create` and `kustomize edit`):
# built once from the Go module pinned in tests/tools/kustomize/go.mod into ~/.cache/ocl-reconciler.
kustomize:
	@if command -v go >/dev/null; then bash tests/tools/kustomize/build.sh >/dev/null; \
	  else echo 'go is not on the PATH: the doc test will skip (OCL_REALAPI=require makes it fail)'; fi

# The signing tests' real parts (tests/realtools/test_signing.py, docs/signing.md): sigstore's `cosign`
# (tests/tools/cosign/go.mod pins v2.4.1; about 8 minutes cold on 2 cores, 16 under load) into
# ~/.cache/ocl-reconciler (OCL_COSIGN_CACHE); policycheck, our small tool that asks containers/image
# v5.42.1 whether a policy.json allows an image (tests/tools/policycheck; about 2 minutes); and
# ocl-crc-render, the MCO's container-runtime-config code from ../shared/mco that renders a
# ClusterImagePolicy into policy.json (tests/tools/crcrender; about 2 minutes, skipped without ../shared).
cosign:
	@if command -v go >/dev/null; then bash tests/tools/cosign/build.sh >/dev/null; \
	  else echo 'go is not on the PATH: the signing tests will skip (OCL_COSIGN=require makes them fail)'; fi

policycheck:
	@if command -v go >/dev/null; then bash tests/tools/policycheck/build.sh >/dev/null; \
	  else echo 'go is not on the PATH: the signing tests will skip (OCL_COSIGN=require makes them fail)'; fi

crcrender:
	@if ! command -v go >/dev/null; then echo 'go is not on the PATH: the signing tests will skip (OCL_COSIGN=require makes them fail)'; \
	  elif [ ! -f ../shared/mco/mco-src.tar.gz ]; then echo '../shared/mco is absent: the signing tests will skip'; \
	  else bash tests/tools/crcrender/build.sh >/dev/null; fi

# The MCO's own render and node controllers and its daemon's reboot rule, in our test harness
# (tests/tools/mco/): built once, offline, from ../shared/mco/mco-src.tar.gz into
# ~/.cache/ocl-reconciler/mco-<hash of the tarball> (OCL_MCO_CACHE), about 5 minutes cold on 2 cores.
mco:
	@if ! command -v go >/dev/null; then echo 'go is not on the PATH: the MCO suites will skip (OCL_MCO=require makes them fail)'; \
	  elif [ ! -f ../shared/mco/mco-src.tar.gz ] && [ -z "$$OCL_MCO_SRC" ]; then \
	    echo '../shared/mco/mco-src.tar.gz is absent: the MCO suites will skip (OCL_MCO=require makes them fail)'; \
	  else bash tests/tools/mco/build.sh >/dev/null; fi

# Five pytest-xdist workers (WORKERS=0: one process): the suite waits on real servers as much as it
# computes: on 2 cores, 1,931 tests took 10 min 34 s in two workers and 7 min 28 s in three;
# 2,038 tests 7 min 11 s in three (2026-12-02); 2,213 tests, the MCO's own controllers among them,
# 14 min 18 s and 11 min 9 s in three (2026-12-04: over the 10-minute goal, issue 37); 2,342 tests
# (signing, run --wait, the live table on the real controllers) 23 min 14 s in three with --dist worksteal,
# its last 5 minutes beside make bench-live (2026-12-05: over the goal, issue 37); 2,344 tests 10 min 41 s
# and 12 min 53 s alone, the same code using 40% more CPU in the second (2026-12-05; make bench-suite);
# 8 min 17 s and 8 min 50 s alone after issue 37's CPU work (docs/development.md, "How long make test takes");
# 2,461 tests 7 min 22 s and 2,503 tests 8 min 24 s alone in a random order (2026-12-06). Five since
# the real node (issue 52): its tests mostly wait, and held three workers while the CPUs idled: 2,553
# tests 12 min 11 s in three, 10 min 38 s in five, 8 min 1 s in five with tests/realnode/ first.
# 2,614 tests (issues 54 and 55: Argo CD's failed run, mixed pools) 10 min 45 s in five: worksteal
# split test_argocd_sync over four workers, each setting Argo CD up again (60 to 100 s a time), so its
# phases are one test now; --dist loadgroup, which keeps a module on one worker, took over 20 min.
# Then 2,610 tests 10 min 40 s alone (2026-12-07): over the goal by 40 s, not yet cut.
WORKERS ?= 5
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (this machine's image sets it):
# without it each worker rewrote and compiled every test module at every run (10 s of CPU a worker;
# 3.5 s with pytest's cached rewrite) and each ocl-reconcile subprocess compiled the package again.
# The tests run in a random order (pytest-randomly), as Kubernetes runs its own unit tests shuffled: a
# test that passes only after another hides a defect (issue 57). The seed is printed before and after
# the run; `make test SEED=N` repeats an order; SEED=none runs them in file order.
ifeq ($(origin SEED),undefined)
SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif
ORDER = $(if $(filter none,$(SEED)),-p no:randomly,-p randomly --randomly-seed=$(SEED))
test: export PYTHONDONTWRITEBYTECODE =
test: install realapi realnode argocd kustomize mco cosign policycheck crcrender
	@echo 'test order: SEED=$(SEED) (make test SEED=$(SEED) repeats it)'
	$(PY) -m pytest -q $(ORDER) $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist worksteal) \
	  || { echo 'make test failed with SEED=$(SEED): make test SEED=$(SEED) repeats this order'; exit 1; }

lint: install
	$(PY) -m pip install --quiet --disable-pip-version-check ruff
	$(VENV)/bin/ruff check reconcile tests bench examples setup.py

bench: install
	$(PY) bench/plan_scale.py

# What a build costs (bench/build_cost.py; not part of `make test`): a generated 51-layer base of
# 400 MB, the build Pod's script as uid 1000, vfs and overlay, a fresh and a kept storage. Root,
# buildah, docker-registry, skopeo; about 15 minutes on 2 cores. ARGS="--size 40" for a quick run,
# ARGS="--fs xfs --write-table" to record the disk factors in manifests/build-disk.yaml. ARGS=--archs
# instead: each architecture's build time for a mixed pool, amd64 natively and arm64 under qemu-user
# (qemu-user-static and binfmt_misc, as .ci/run sets them up), and the emulation factor; about a minute.
bench-build: install
	$(PY) bench/build_cost.py $(ARGS)

# requirements.lock (the pins of a fresh `pip install .`) and requirements-build.lock (setuptools), each
# pin with the sha256 of the files pip installs on CPython 3.11, Linux x86_64 and aarch64
# (tests/tools/lock/hashes.py: `pip download` for each platform; about 2 minutes).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install --quiet .
	.lock-venv/bin/pip freeze --exclude ocl-reconciler > .lock-venv/pins.txt
	$(PYTHON) tests/tools/lock/hashes.py lock .lock-venv/pins.txt && rm -rf .lock-venv build

clean:
	rm -rf $(VENV) $(DEMO) $(INSTALLED) .pytest_cache

# What each kind of change costs a pool, with and without live changes and under the MCO's own
# layering's rule (bench/live_changes.py; docs/rollout.md's table): on the real kube-apiserver with the
# MCO's own render and node controllers and the real daemon's verdicts, every row in both modes (5 min 9 s
# on 2 cores, 2026-12-05); ARGS=--imitations on the render and node imitations (about 3 minutes).
bench-live: install realapi mco
	$(PY) bench/live_changes.py $(ARGS)

# A change reaches its nodes in one run (issue 40; bench/one_run.py, docs/rollout.md section 3b): runs and
# seconds from a change to the first node's new desiredConfig, with and without run --wait, on the real
# kube-apiserver; the MCO's real controllers where `make mco` built them (else its imitations, said).
bench-one-run: install realapi
	$(PY) bench/one_run.py $(ARGS)

# How long make test takes and where (issue 37: under 10 minutes on 2 cores; bench/suite_time.py): the
# suite as make test runs it, with each file's wall time and CPU, and how busy the CPUs were. Run it alone.
bench-suite: export PYTHONDONTWRITEBYTECODE =
bench-suite: install realapi realnode argocd kustomize mco cosign policycheck crcrender
	$(PY) bench/suite_time.py --workers $(WORKERS) $(if $(ARGS),-- $(ARGS))
