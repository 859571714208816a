# SPDX-License-Identifier: GPL-2.0
#
# lbr-dump: top-level entry points.
#
#   make                      build lbr_dump.ko against the pinned test kernel (made on first use)
#   make KDIR=/path/to/linux  build lbr_dump.ko against your own kernel tree, with your toolchain
#                             (pass LLVM=1 etc. as your kernel was built); objects go to out/
#   make test                 every test: host cargo tests, kernel + module builds, KUnit, QEMU
#                             scenarios; ends with "N passed, N failed"
#   make demo                 the main job: build, boot a VM, load the module, show its report
#   make vm ARGS="..."        boot the test VM by hand (scripts/vm.py --help)
#
# The pinned environment and kernel builds are cached in $LBR_DUMP_CACHE (~/.cache/lbr-dump).

.PHONY: all module test demo vm clean

ifneq ($(KDIR),)
all module:
	$(MAKE) -C $(KDIR) M=$(CURDIR) MO=$(CURDIR)/out/module modules
clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) MO=$(CURDIR)/out/module clean
else
all module:
	scripts/module.sh
clean:
	rm -rf out target
endif

test:
	python3 tests/run.py

demo:
	scripts/demo.sh

vm:
	python3 scripts/vm.py $(ARGS)
