# SPDX-License-Identifier: GPL-2.0
"""Stack use of a module's own code, from its disassembly (llvm-objdump -dr).

A function's frame is the most stack it reserves anywhere in its body: the running total of its
pushes and `sub $N, %rsp` less its pops and `add $N, %rsp`, in the order of the disassembly
(LLVM's shrink-wrapping puts a test and an early return before the pushes; an epilogue's pops
before a block that still runs with the frame bring the total down, never below zero). Its depth
is its frame, plus 8 and the deepest callee's depth for each direct call to a function of the
same object, or a tail jump's target depth. Calls out of the object (printk, memcpy) count
nothing: the caller states what it adds for them. `core::fmt::write`, the one way back in
through function pointers, counts as calling the object's deepest formatting callback
(`<T as Display>::fmt`, `write_str`, `write_char`: see `deepest`)."""

import re

FMT_WRITE = "4core3fmt5write"


def parse(disassembly: str) -> dict[str, dict]:
    """Frame size, direct calls and tail jumps of each function in `llvm-objdump -dr` output."""
    funcs: dict[str, dict] = {}
    cur = None
    f: dict = {}
    for line in disassembly.splitlines():
        m = re.match(r"^[0-9a-f]+ <(\S+)>:$", line)
        if m:
            cur = m[1]
            f = funcs[cur] = {"frame": 0, "calls": set(), "tails": set(), "rsp": 0, "last": None}
            continue
        if cur is None:
            continue
        m = re.match(r"^\s*[0-9a-f]+:\s+R_X86_64_\S+\s+(\S+?)(?:[-+]0x[0-9a-f]+)?$", line)
        if m:
            # The relocation of the call or jmp before it names the target.
            if f["last"]:
                f["calls" if f["last"] == "call" else "tails"].add(m[1])
            f["last"] = None
            continue
        m = re.match(r"^\s*[0-9a-f]+:\s+(\S+)\s*(.*)$", line)
        if not m:
            continue
        op, arg = m[1], m[2]
        f["last"] = None
        # Immediates in hex (LLVM 19) or decimal (older objdumps).
        imm = re.match(r"\$(0x[0-9a-f]+|\d+), %rsp(?:\s|$)", arg)
        if op.startswith("push"):
            f["rsp"] += 8
        elif op.startswith("pop"):
            f["rsp"] = max(0, f["rsp"] - 8)
        elif imm and op.startswith("sub"):
            f["rsp"] += int(imm[1], 0)
        elif imm and op.startswith("add"):
            f["rsp"] = max(0, f["rsp"] - int(imm[1], 0))
        f["frame"] = max(f["frame"], f["rsp"])
        if op.startswith(("call", "jmp")):
            kind = "call" if op.startswith("call") else "jmp"
            f["last"] = kind
            t = re.search(r"<([^+>]+)>", arg)
            if t and t[1] != cur:
                f["calls" if kind == "call" else "tails"].add(t[1])
    return funcs


def deepest(funcs: dict[str, dict], root: str,
            display: str = r"(6report|7printer).*3fmt$", write: str = r"(9write_str|10write_char)$") -> tuple[int, list[str]]:
    """The most stack `root` can use of the object's own frames, and the chain that uses it.
    core::fmt::write called from the object may call back any of its Display impls matching
    `display` or Write impls matching `write`; called from one of those (a `write!(f, ...)` in a
    Display impl), only the Write impls: the Display impls of src/report.rs format numbers and
    strings, never another of lbr-dump's types."""
    top = [n for n in funcs if re.search(f"{display}|{write}", n) and not n.startswith("__pfx")]
    inner = [n for n in top if re.search(write, n)]

    def depth(name: str, stack: tuple[str, ...], nested: bool) -> tuple[int, list[str]]:
        if FMT_WRITE in name and not name.startswith("__pfx"):
            d, p = max((depth(c, stack, True) for c in (inner if nested else top) if c not in stack),
                       default=(0, []))
            return d, ["core::fmt::write"] + p
        if name not in funcs or name in stack:
            return 0, []
        f = funcs[name]
        best: tuple[int, list[str]] = (f["frame"], [])
        for c in f["calls"]:
            d, p = depth(c, stack + (name,), nested)
            if f["frame"] + 8 + d > best[0]:
                best = (f["frame"] + 8 + d, p)
        for t in f["tails"]:
            d, p = depth(t, stack + (name,), nested)
            if d > best[0]:
                best = (d, p)
        return best[0], [f"{name} ({f['frame']})"] + best[1]

    return depth(root, (), False)
