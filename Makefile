# SPDX-License-Identifier: GPL-2.0
#
# lbr-dump: top-level entry points.
#
#   make                      build lbr_dump.ko against the pinned test kernel (made on first use)
#   make KDIR=/path/to/linux  build lbr_dump.ko against your own kernel tree, with your toolchain
#                             (pass LLVM=1 etc. as your kernel was built); objects go to out/module
#                             (MO=DIR: elsewhere); README "Building against your own kernel"
#   make debian               build lbr_dump.ko for Debian's own 7.3 kernel (scripts/debian.sh),
#                             with GCC 14 and rustc 1.85.1 as Debian built it: out/module-debian/
#   make test                 every test: host cargo tests, fmt, clippy, lbr-decode's fuzzers (30 s
#                             each), both kernel builds, the module build from clean, the QEMU
#                             scenarios, then benchmark reports; ends "N passed, N failed"
#   make test-host            only the host tests (seconds)
#   make test-kvm             the KVM guest scenarios under this host's KVM (README "KVM guests");
#                             one SKIP line with the reason where KVM cannot run such a guest
#   make demo                 the main job: build, boot a VM under the branch-record emulator, crash
#                             it, show the oops' branch records decoded by lbr-decode
#   make vm ARGS="..."        boot the test VM by hand (scripts/vm.py --help)
#
# The pinned environment and kernel builds are cached in $LBR_DUMP_CACHE (~/.cache/lbr-dump).

.PHONY: all module debian test test-host test-kvm demo vm clean

# Where a KDIR build puts its objects.
MO ?= $(CURDIR)/out/module

ifneq ($(KDIR),)
all module:
	$(MAKE) -C $(KDIR) M=$(CURDIR) MO=$(MO) modules
clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) MO=$(MO) clean
else
all module:
	scripts/module.sh
clean:
	rm -rf out target
endif

debian:
	scripts/module.sh "$(CURDIR)" debian

test:
	python3 tests/run.py

test-host:
	python3 tests/run.py --host-only --fuzz-seconds 0

test-kvm:
	python3 tests/run.py --kvm

demo:
	scripts/demo.sh

vm:
	python3 scripts/vm.py $(ARGS)
