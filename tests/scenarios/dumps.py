# SPDX-License-Identifier: GPL-2.0
"""makedumpfile's vmcores, as Debian/Ubuntu kdump-tools and RHEL/Fedora kdump save them by
default: the capture kernel of a kdump (harness.kdump) runs Debian's makedumpfile (the build
root's, with its shared libraries) on /proc/vmcore with dump level 31 (free, cache, user and zero
pages left out) and each compression, and with -F (the flattened stream written to a pipe, as
over ssh); lbr-decode must read each as it reads the console log.

The capture kernel has no filesystem but its 128 MiB of ramfs: the kdump-compressed files of -c,
-l and -z (a few tens of MiB) are written there and copied to the disk one at a time; the
flattened streams go through a pipe straight to the disk, and the host rearranges each with
`makedumpfile -R` into a kdump-compressed file too, which is read as well. Debian builds
makedumpfile without snappy (`makedumpfile -v`: snappy disabled; -p then writes pages
uncompressed, saying "'-p' option is disabled"): that is asserted, its output is read as an
uncompressed kdump file, and snappy pages are covered by the host tests only (src/dump/kdump.rs).

The guest has 1 GiB, so that its ELF vmcore (at the start of the disk) is also the source of
scripts/bench.sh's 1 GiB kdump-compressed dump.
"""

from __future__ import annotations

import functools
import json
import re
import struct
import subprocess
from pathlib import Path

from harness import CRASH, MIB, decode, kdump, symbols, tail
from scenarios.decode import dump_agrees_with_log
from vm import REPO

NAME = "dumps-kdump"
RUN = REPO / "out" / "vm" / NAME
# Where the capture kernel puts makedumpfile's outputs on the disk (after the vmcore of 1 GiB),
# and the room each flattened stream gets there.
FIRST_MIB = 1100
PIPE_MIB = 192
DISK_MIB = 2304

# diskdump_mod.h: disk_dump_header.status / page_desc.flags compression bits.
ZLIB, LZO, SNAPPY, ZSTD = 0x1, 0x2, 0x4, 0x20
COMPRESSIONS = {"-c": ZLIB, "-l": LZO, "-p": 0, "-z": ZSTD}  # -p: no snappy in Debian's build

CAPTURE = f"""
set -o pipefail
MDF=/usr/bin/makedumpfile
echo "dumps: version: $($MDF -v 2>&1 | tr '\\n' ' ')"
OFF={FIRST_MIB}
# makedumpfile's messages without the progress indicator (message level 6: common and errors).
report() {{ tr '\\r' '\\n' < /dumps.log | grep -v '^ *$' | sed "s/^/dumps: $1: /"; }}
to_file() {{ # NAME OPTION: the dump to a file in ramfs, then to the disk
  $MDF --message-level 6 $2 -d 31 /proc/vmcore /dumps.out > /dumps.log 2>&1; rc=$?
  report "$1"
  size=$(stat -c %s /dumps.out)
  dd if=/dumps.out of=/dev/vda bs=1M seek=$OFF conv=fsync 2>/dev/null; dd=$?
  rm -f /dumps.out
  echo "dumps: saved $1 rc=$rc at=$OFF size=$size dd=$dd"
  OFF=$((OFF + size / 1048576 + 1))
}}
to_pipe() {{ # NAME OPTION: -F to standard output, through a pipe to the disk
  $MDF --message-level 6 -F $2 -d 31 /proc/vmcore 2> /dumps.log | dd of=/dev/vda bs=1M seek=$OFF conv=fsync 2>/dev/null; rc=$?
  report "$1"
  echo "dumps: saved $1 rc=$rc at=$OFF size=pipe dd=$rc"
  OFF=$((OFF + {PIPE_MIB}))
}}
echo "dumps: free before: $(free -k | tr -s ' ' | tr '\\n' ';')"
for c in -c -l -z; do to_file "file$c" $c; done
for c in -c -l -p -z; do to_pipe "flat$c" $c; done
echo "dumps: done"
"""

# What makedumpfile may say besides its result: 1.7.6 predates kernel 7.3 and says so (it reads
# the kernel's layout from VMCOREINFO all the same; the tests below show the filtering worked).
ALLOWED = [
    r"The kernel version is not supported\.",
    r"The makedumpfile operation may be incomplete\.",
    r"The dumpfile is saved to (/dumps\.out|STDOUT)\.",
    r"makedumpfile Completed\.",
]
SNAPPY_MISSING = [r"'-p' option is disabled, because this binary doesn't support snappy compression\.",
                  r"Try `make USESNAPPY=on` when building\."]


def makedumpfile_files() -> tuple[str, ...]:
    """makedumpfile and the shared libraries it loads, as paths in the build root (ldd)."""
    out = subprocess.run(["bash", "-c", "source scripts/common.sh; in_root ldd /usr/bin/makedumpfile"],
                         cwd=REPO, text=True, capture_output=True, check=True).stdout
    libs = re.findall(r"(/\S+) \(0x", out)
    assert any("libz.so" in l for l in libs) and any("liblzo2" in l for l in libs), out
    return ("/usr/bin/makedumpfile", *libs)


def flattened_length(b: bytes) -> int:
    """Length of a flattened stream (makedumpfile.h: a 4096-byte header, then big-endian
    (offset, size) record headers each followed by size bytes, ending with (-1, -1))."""
    assert b[:12] == b"makedumpfile", b[:16]
    pos = 4096
    while True:
        off, size = struct.unpack_from(">qq", b, pos)
        pos += 16
        if (off, size) == (-1, -1):
            return pos
        assert off >= 0 and 0 < size <= len(b) - pos, (pos, off, size)
        pos += size


@functools.cache
def dumped():
    """One kdump of a crash (the corrupted pointer, oops=panic) whose capture kernel runs
    makedumpfile; returns the run, the disk (ELF vmcore at its start) and makedumpfile's outputs
    by name (file-c, flat-c, flat-c.R: its -R rearrangement, ...), written under the run's
    directory."""
    res, disk = kdump(NAME, f"sh -c 'insmod {CRASH} crash=jump' || true", append="oops=panic",
                      cpu="Skylake-Client", accel="tcg", emulate="model=skylake", memory="1G",
                      capture_script=CAPTURE, root_files=makedumpfile_files(), disk_mib=DISK_MIB)
    con = res.console
    assert "lbr_dump: v2 " in con, "no snapshot printed:\n" + tail(con)
    assert "dumps: done" in con, "the capture kernel did not run makedumpfile to the end:\n" + tail(con)
    outputs = {}
    with open(disk, "rb") as f:
        for m in re.finditer(r"dumps: saved (\S+) rc=(\d+) at=(\d+) size=(\S+) dd=(\d+)", con):
            name, rc, at, size, dd = m.groups()
            assert (rc, dd) == ("0", "0"), f"{name}: makedumpfile exit {rc}, dd exit {dd}:\n" + tail(con)
            f.seek(int(at) * MIB)
            if size == "pipe":
                data = f.read(PIPE_MIB * MIB)
                data = data[:flattened_length(data)]
            else:
                data = f.read(int(size))
            out = RUN / f"vmcore.{name}"
            out.write_bytes(data)
            outputs[name] = out
            if size == "pipe":
                rearranged = RUN / f"vmcore.{name}.R"
                rearranged.unlink(missing_ok=True)
                subprocess.run(["bash", "-c", 'source scripts/common.sh; in_root sh -c '
                                '\'makedumpfile -R "$1" < "$2"\' _ "$1" "$2"', "_",
                                str(rearranged), str(out)],
                               cwd=REPO, check=True, capture_output=True)
                outputs[name + ".R"] = rearranged
    want = {"file-c", "file-l", "file-z", "flat-c", "flat-l", "flat-p", "flat-z"}
    assert want <= outputs.keys(), f"saved {sorted(outputs)}:\n" + tail(con)
    return res, disk, outputs


def header(path: Path) -> dict:
    """Fields of a kdump-compressed file's headers (diskdump_mod.h, x86-64), read here rather
    than by lbr-decode: signature, status, block size, sub header blocks, bitmap blocks,
    dump_level and max_mapnr (sub header version 6)."""
    with open(path, "rb") as f:
        b = f.read(2 * 4096)
    status, block, sub, bitmap = struct.unpack_from("<IiiI", b, 424)
    dump_level, = struct.unpack_from("<i", b, 4096 + 8)
    max_mapnr, = struct.unpack_from("<Q", b, 4096 + 96)
    return dict(signature=b[:8], status=status, block=block, sub=sub, bitmap=bitmap,
                dump_level=dump_level, max_mapnr=max_mapnr)


def page_flags(path: Path, h: dict) -> dict:
    """How many page descriptors carry each compression flag (page_desc_t of diskdump_mod.h:
    offset u64, size u32, flags u32, page_flags u64; one per page set in the second bitmap, from
    block 1 + sub header blocks + bitmap blocks), read here rather than by lbr-decode: the header's
    status says what was asked for, the descriptors what makedumpfile did (it stores a page raw,
    flag 0, where compressing does not shrink it)."""
    data = path.read_bytes()
    half = h["bitmap"] // 2 * h["block"]
    bitmap2 = (1 + h["sub"]) * h["block"] + half
    pages = sum(bin(b).count("1") for b in data[bitmap2:bitmap2 + -(-h["max_mapnr"] // 8)])
    base = (1 + h["sub"] + h["bitmap"]) * h["block"]
    counts = {}
    for i in range(pages):
        flags, = struct.unpack_from("<I", data, base + 24 * i + 12)
        counts[flags] = counts.get(flags, 0) + 1
    return counts


def test_makedumpfile_runs_clean_in_the_capture_kernel(r):
    res, _, _ = dumped()
    lines = [l for l in res.console.splitlines() if l.startswith("dumps: ")]
    version = next(l for l in lines if l.startswith("dumps: version: "))
    # Debian's build: lzo and zstd compiled in, snappy not (if that changes, -p below is snappy
    # and this scenario must compare its pages too).
    assert "lzo\tenabled" in version and "zstd\tenabled" in version, version
    assert "snappy\tdisabled" in version, version
    for name in ("file-c", "file-l", "file-z", "flat-c", "flat-l", "flat-p", "flat-z"):
        said = [l.split(": ", 2)[2] for l in lines if l.startswith(f"dumps: {name}: ")]
        assert "makedumpfile Completed." in said, (name, said)
        allowed = ALLOWED + (SNAPPY_MISSING if name == "flat-p" else [])
        other = [l for l in said if not any(re.fullmatch(a, l) for a in allowed)]
        assert not other, f"makedumpfile {name} said: {other}"


def test_each_compression_agrees_with_log(r):
    res, _, outputs = dumped()
    _, out, err = decode(*symbols(), res.log)
    [logged] = json.loads(out)["snapshots"]
    for name, path in sorted(outputs.items()):
        # The file is what makedumpfile was asked for: kdump-compressed or flattened, with the
        # compression of its option in the header.
        if name.startswith("flat-") and not name.endswith(".R"):
            assert path.read_bytes()[:16] == b"makedumpfile\0\0\0\0", name
            continue  # its header is in the .R file; the stream is decoded below
        h = header(path)
        assert h["signature"] == b"KDUMP   " and h["block"] == 4096, (name, h)
        want = COMPRESSIONS[name.split(".")[0][-2:]]
        assert h["status"] & (ZLIB | LZO | SNAPPY | ZSTD) == want, (name, h)
        # And the pages are compressed that way: none carries another flag, and thousands carry
        # this one (measured: about 15,000 of 224,000 pages with -c, -l or -z; the others are
        # stored raw, flag 0), so lbr-decode's scan runs its decompressor on real pages; with -p
        # (no snappy in Debian's build) every page is raw.
        flags = page_flags(path, h)
        assert set(flags) <= {0, want}, (name, flags)
        assert flags.get(want, 0) > 1000, (name, flags)
    for name, path in sorted(outputs.items()):
        try:
            dump_agrees_with_log(path, logged)
        except AssertionError as e:
            raise AssertionError(f"{name} ({path}): {e}") from e


def test_snapshot_area_survives_dump_level_31(r):
    """The area is memory lbr-dump allocated with __get_free_pages(GFP_KERNEL) (src/glue.c):
    not free, not page cache, not a user page, and not a compound page (no __GFP_COMP: not hit
    by makedumpfile 1.7.9's and older's wrong exclusion of compound tail pages on Linux 7.1 and later,
    "Fix wrong exclusion of compound tail pages"); makedumpfile's -d 31 must keep it. Pages of it
    that are all zero (empty ring slots) are 'excluded' as zero pages, which in the
    kdump-compressed format means kept in the bitmap and pointed at the dump's one zero page, so
    the area reads whole. Shown on the bitmap of the -c dump, read here, not by lbr-decode."""
    res, disk, outputs = dumped()
    # The area's address and size, from the ELF vmcore (found by lbr-decode, the size read here).
    code, out, err = decode(disk)
    assert code == 0, err
    sources = {s["source"] for s in json.loads(out)["snapshots"]}
    assert len(sources) == 1, sources
    paddr = int(sources.pop().rsplit("@", 1)[1], 16)
    area_size = elf_read(disk, paddr + 0x10, 8)
    area_size, = struct.unpack("<Q", area_size)
    assert elf_read(disk, paddr, 8) == b"LBRDUMP\0"
    first, last = paddr // 4096, (paddr + area_size - 1) // 4096
    zero = [pfn for pfn in range(first, last + 1) if elf_read(disk, pfn * 4096, 4096) == bytes(4096)]
    path = outputs["file-c"]
    h = header(path)
    assert h["dump_level"] == 31, h
    with open(path, "rb") as f:
        f.seek((1 + h["sub"]) * 4096)
        bitmaps = f.read(h["bitmap"] * 4096)
    half = len(bitmaps) // 2
    present, dumped_ = bitmaps[:half], bitmaps[half:]
    bit = lambda bm, pfn: bm[pfn // 8] >> (pfn % 8) & 1
    frames = sum(bin(b).count("1") for b in present)
    kept = sum(bin(b).count("1") for b in dumped_)
    # -d 31 filtered: page cache and user pages are out. Free pages are not: Debian trixie's
    # makedumpfile 1.7.6 takes every free page of a kernel >= 6.12 for a slab page (page types
    # became values; fixed in makedumpfile 1.7.7, "fix detection of typed (compound) pages"),
    # so it keeps them, as zero pages here. The area is not a free page either way.
    assert 0 < frames - kept, f"makedumpfile -d 31 kept all {frames} frames"
    missing = [hex(pfn) for pfn in range(first, last + 1) if not bit(dumped_, pfn)]
    assert not missing, (f"the area at {paddr:#x} ({area_size} bytes, frames {first:#x}-{last:#x}, "
                         f"zero pages {[hex(z) for z in zero]}) lost frames {missing} to -d 31")


def elf_read(path: Path, paddr: int, n: int) -> bytes:
    """`n` bytes of physical memory at `paddr` from an ELF vmcore's PT_LOADs (within one)."""
    with open(path, "rb") as f:
        eh = f.read(64)
        phoff, = struct.unpack_from("<Q", eh, 32)
        phnum, = struct.unpack_from("<H", eh, 56)
        f.seek(phoff)
        ph = f.read(56 * phnum)
        for i in range(phnum):
            p_type, _, off, _, pa, filesz = struct.unpack_from("<IIQQQQ", ph, 56 * i)
            if p_type == 1 and pa <= paddr and paddr + n <= pa + filesz:
                f.seek(off + paddr - pa)
                return f.read(n)
    raise AssertionError(f"physical {paddr:#x}+{n} is in no PT_LOAD of {path}")
