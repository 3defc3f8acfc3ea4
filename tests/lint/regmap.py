#!/usr/bin/env python3
"""The register map has one source: include/hw/exanest-pldma-regs.h. Checks the other forms
against it (the core's constants are checked by rust/exanest-core/tests/c_header.rs):

- Documentation/pldma-registers.rst: every register table row names a register of the
  header at the header's offset, and every register of the header has its row;
- the driver's `register!` blocks (drivers/hw/regs.rs, drivers/hw/netregs.rs): every register sits
  at the header's offset; every header register of the blocks the driver programs (global,
  context, channel, a channel's network block) is declared, or listed in UNUSED below with
  the reason; every field of a register matches a header mask bit for bit; and a register
  whose header defines fields does not declare them as one `31:0 value`.

The header's values come from the C compiler (tests/qemu-model/regtable.py), not from
parsing C. Prints one line per problem and exits 1 if there is any.
"""
import pathlib
import re
import sys

TOP = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests/qemu-model"))
import regtable  # noqa: E402

# Header registers of the driver's blocks that the driver does not declare, and why.
UNUSED = {
    "PLDMA_SCRATCH": "a probing aid for the model's tests",
    "PLDMA_NET_WINDOW": "the sender's window is the engine's business",
    "PLDMA_NET_LINK_LATENCY": "the model's link timing, read by its tests",
    "PLDMA_NET_LINK_BW": "the model's link timing, read by its tests",
    "PLDMA_NET_RTO_US": "link.rs reads and writes the link's settings by the core's offsets "
                        "(net::TUNABLES, checked against the header by cargo test)",
    "PLDMA_NET_RETRIES": "as PLDMA_NET_RTO_US",
    "PLDMA_NET_DROP_PPM": "as PLDMA_NET_RTO_US",
    "PLDMA_NET_CORRUPT_PPM": "as PLDMA_NET_RTO_US",
    "PLDMA_NET_REORDER_PPM": "as PLDMA_NET_RTO_US",
    "PLDMA_NET_REORDER_US": "as PLDMA_NET_RTO_US",
    "PLDMA_CTX_KQ_ERR_LO": "a kernel queue error ends its copies; the address is not reported",
    "PLDMA_CTX_KQ_ERR_HI": "as PLDMA_CTX_KQ_ERR_LO",
    "PLDMA_CTX_KQ_SQ_HEAD": "the driver follows completions, not fetches",
    "PLDMA_CH_FAULTS": "a statistic the driver counts itself",
    "PLDMA_CTX_FREC_TAIL": "the driver reads records by their stamps, not by TAIL",
    "PLDMA_CH_WRID_HI": "the kernel queue's wr_id is its slot, below 2^32",
    "PLDMA_CH_NET_OP": "ops start from descriptors, not from these registers",
    "PLDMA_CH_NET_PEER": "ops start from descriptors, not from these registers",
    "PLDMA_CH_NET_EP": "ops start from descriptors, not from these registers",
    "PLDMA_CH_NET_RKEY_LO": "ops start from descriptors, not from these registers",
    "PLDMA_CH_NET_RKEY_HI": "ops start from descriptors, not from these registers",
    "PLDMA_CH_NET_STATUS": "a remote error's errno comes in the CQE",
}

# Every field of a driver register: register -> {field: header macro (or mask, where the
# header gives the encoding in words)}. A register not listed has one field: its value.
FIELDS = {
    "VERSION": {"minor": 0x0000ffff, "major": 0xffff0000},  # major << 16 | minor
    "CAPS": {"channels": "PLDMA_CAPS_NCHAN_MASK", "resume": "PLDMA_CAPS_RESUME",
             "intx": "PLDMA_CAPS_INTX", "timing": "PLDMA_CAPS_TIMING",
             "sriov": "PLDMA_CAPS_SRIOV", "net": "PLDMA_CAPS_NET",
             "mailbox": "PLDMA_CAPS_MAILBOX", "frec": "PLDMA_CAPS_FREC",
             "contexts": "PLDMA_CAPS_NCTX_MASK"},
    "CTX_IRQ_STATUS": {"channels": "PLDMA_CTX_IRQ_CHANNELS", "cq": "PLDMA_CTX_IRQ_CQ",
                       "qerr": "PLDMA_CTX_IRQ_QERR", "kcq": "PLDMA_CTX_IRQ_KCQ",
                       "kqerr": "PLDMA_CTX_IRQ_KQERR", "mbox": "PLDMA_CTX_IRQ_MBOX",
                       "frec_lost": "PLDMA_CTX_IRQ_FREC_LOST"},
    "CTX_CTRL": {"quiesce": "PLDMA_CTX_QUIESCE"},
    "CTX_STATUS": {"active": "PLDMA_CTX_ACTIVE", "function": "PLDMA_CTX_FUNCTION"},
    "Q_CFG": {"log2_sq": "PLDMA_Q_CFG_SQ_MASK", "log2_cq": "PLDMA_Q_CFG_CQ_MASK",
              "channels": "PLDMA_Q_CFG_CHAN_MASK"},
    "Q_CTRL": {"enable": "PLDMA_Q_CTRL_ENABLE", "restore": "PLDMA_Q_CTRL_RESTORE",
               "arm": "PLDMA_Q_CTRL_ARM"},
    "Q_STATUS": {"enabled": "PLDMA_Q_STATUS_ENABLED", "error": "PLDMA_Q_STATUS_ERROR",
                 "evt_lost": "PLDMA_Q_STATUS_EVT_LOST", "busy": "PLDMA_Q_STATUS_BUSY",
                 "armed": "PLDMA_Q_STATUS_ARMED", "code": "PLDMA_Q_STATUS_ERR_MASK"},
    "EVT_POST": {"count": "PLDMA_EVT_POST_COUNT_MASK", "kind": "PLDMA_EVT_POST_KIND_MASK"},
    # The kernel queue's: as the user-level queue's, without RESTORE, ARM, EVT_LOST, ARMED.
    "KQ_CFG": {"log2_sq": "PLDMA_Q_CFG_SQ_MASK", "log2_cq": "PLDMA_Q_CFG_CQ_MASK",
               "channels": "PLDMA_Q_CFG_CHAN_MASK"},
    "KQ_CTRL": {"enable": "PLDMA_Q_CTRL_ENABLE"},
    "KQ_STATUS": {"enabled": "PLDMA_Q_STATUS_ENABLED", "error": "PLDMA_Q_STATUS_ERROR",
                  "busy": "PLDMA_Q_STATUS_BUSY", "code": "PLDMA_Q_STATUS_ERR_MASK"},
    "CH_CTRL": {"start": "PLDMA_CTRL_START", "resume": "PLDMA_CTRL_RESUME",
                "nack": "PLDMA_CTRL_NACK", "irq_en": "PLDMA_CTRL_IRQ_EN",
                "seq_check": "PLDMA_CTRL_SEQ_CHECK", "seq": "PLDMA_CTRL_SEQ_MASK"},
    "CH_STATUS": {"state": "PLDMA_STATUS_STATE_MASK", "error": "PLDMA_STATUS_ERR_MASK",
                  "rejected": "PLDMA_STATUS_REJECTED", "fault_seq": "PLDMA_STATUS_FAULT_SEQ_MASK"},
    "CH_FAULT_INFO": {"write": "PLDMA_FAULT_WRITE", "cause": "PLDMA_FAULT_CAUSE_MASK"},
    "CH_ORIGIN": {"sq_index": "PLDMA_ORIGIN_SQ_INDEX_MASK", "net_rx": "PLDMA_ORIGIN_NET_RX",
                  "kernel": "PLDMA_ORIGIN_KERNEL", "queue": "PLDMA_ORIGIN_QUEUE"},
    "NET_NODE": {"id": "PLDMA_NET_NODE_ID_MASK", "link": "PLDMA_NET_NODE_LINK"},
    "NET_EP_CTX": {"ctx": "PLDMA_NET_EP_CTX_MASK", "resident": "PLDMA_NET_EP_RESIDENT",
                   "open": "PLDMA_NET_EP_OPEN", "mbox": "PLDMA_NET_EP_MBOX"},
    "NET_RKEY_CTRL": {"valid": "PLDMA_NET_RKEY_VALID", "read": "PLDMA_NET_RKEY_READ",
                      "write": "PLDMA_NET_RKEY_WRITE", "bound": "PLDMA_NET_RKEY_BOUND"},
    "NET_IRQ": {"ep_wanted": "PLDMA_NET_IRQ_EP_WANTED"},
    "MBOX_CFG": {"log2": "PLDMA_MBOX_CFG_LOG2_MASK", "enable": "PLDMA_MBOX_CFG_ENABLE"},
    "MBOX_ARM": {"once": "PLDMA_MBOX_ARM_ONCE"},
    "FREC_CFG": {"log2": "PLDMA_FREC_CFG_LOG2_MASK", "enable": "PLDMA_FREC_CFG_ENABLE"},
}
# The header's field masks and bits of the registers above: each must be some register's
# field in FIELDS (a field the header adds fails until the driver declares it).
FIELD_FAMILIES = re.compile(
    r"^PLDMA_(CAPS|CTX_IRQ|Q_CFG|Q_CTRL|Q_STATUS|EVT_POST|CTRL|STATUS|FAULT|ORIGIN|NET_NODE"
    r"|NET_IRQ|MBOX_CFG|MBOX_ARM|FREC_CFG)_\w+$|^PLDMA_NET_EP_(CTX_MASK|RESIDENT)$"
    r"|^PLDMA_NET_RKEY_(VALID|READ|WRITE)$|^PLDMA_CTX_(QUIESCE|ACTIVE|FUNCTION)$")
# Of those, what is not a field: shifts, a composite mask, and the registers themselves.
NOT_FIELDS = re.compile(r"_SHIFT$|^PLDMA_CTRL_STROBES$|^PLDMA_CTX_IRQ_STATUS$")

# The global block's registers below the network port's (0x100 on).
GLOBAL = (r"PLDMA_(ID|VERSION|CAPS|MAX_LEN|IRQ_SUMMARY_LO|IRQ_SUMMARY_HI|BANDWIDTH|LATENCY"
          r"|SCRATCH|RESET|QUANTUM)")
# What is not a register offset among the other blocks' macros.
# Arrays of counters: registers by their first element's macro.
COUNTER_BLOCKS = ("PLDMA_NET_CNT_BASE", "PLDMA_NET_CC_BASE")
SKIP_SUFFIX = re.compile(r"_(MASK|SHIFT|MAGIC|SIZE|STRIDE|BASE|OFFSET|WORDS|COUNTERS)$|_MAX_")


def header_registers(h):
    """{macro: absolute offset} of every register of the global, context, channel and channel
    network blocks, and {macro: offset in the VF page} of the VF page's."""
    regs, vf = {}, {}
    ctx, ch, chnet = h["PLDMA_CTX_BASE"], h["PLDMA_CH_BASE"], h["PLDMA_CH_NET_BASE"]
    for name, v in h.items():
        if re.fullmatch(GLOBAL, name):
            regs[name] = v
            continue
        if SKIP_SUFFIX.search(name) and name not in COUNTER_BLOCKS:
            continue
        if name.startswith("PLDMA_VF_"):
            if v % 4 == 0 and v < h["PLDMA_VF_MMIO_SIZE"] and name not in ("PLDMA_VF_CQ_ARM_ONCE",):
                vf[name] = v
        elif name.startswith("PLDMA_CH_NET_"):
            regs[name] = ctx + chnet + v
        elif name.startswith("PLDMA_CH_"):
            regs[name] = ctx + ch + v
        elif name.startswith("PLDMA_CTX_"):
            if name.startswith("PLDMA_CTX_IRQ_") and name != "PLDMA_CTX_IRQ_STATUS":
                continue
            if name in ("PLDMA_CTX_QUIESCE", "PLDMA_CTX_ACTIVE", "PLDMA_CTX_FUNCTION"):
                continue
            regs[name] = ctx + v
        elif name.startswith("PLDMA_NET_"):
            if 0x100 <= v < 0x200 and v % 4 == 0:
                regs[name] = v
    return regs, vf


def rst_tables(text):
    """[(section path, [(offset, name)])] of every register table ("Offset Name ...")."""
    lines = text.splitlines()
    titles, out = [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        if (i + 1 < len(lines) and re.fullmatch(r"([-=])\1{2,}", lines[i + 1])
                and line.strip() and not re.fullmatch(r"[-= ]+", line)):
            level = 0 if lines[i + 1][0] == "=" else 1
            titles = titles[:level] + [line.strip()]
        if re.match(r"^Offset\s+Name\b", line) and i + 1 < len(lines):
            rows = []
            j = i + 2
            while j < len(lines) and not re.match(r"^=+ ", lines[j]):
                m = re.match(r"^(0x[0-9a-fA-F]+)\s+([A-Z][A-Z0-9_]*(?:\[\d+\])?)\s", lines[j])
                if m:
                    rows.append((int(m.group(1), 16), m.group(2), j + 1))
                j += 1
            out.append((tuple(titles), rows))
            i = j
        i += 1
    return out


def rst_macro(path, name):
    """The header macro and block of a row named `name` in the table under `path`, or None."""
    top, sub = path[0] if path else "", path[-1] if path else ""
    net = top.startswith("The network port")
    if sub.startswith("VF registers"):
        return ("PLDMA_" + name if name.startswith("VF_") else "PLDMA_VF_" + name), "vf"
    if sub == "Global registers":
        return "PLDMA_" + name, "abs"
    if sub == "Context registers" or sub.startswith("The mailbox"):
        return ("PLDMA_" + name if name.startswith("CTX_") else "PLDMA_CTX_" + name), "ctx"
    if sub == "Channel registers":
        return ("PLDMA_CH_NET_" if net else "PLDMA_CH_") + name, ("chnet" if net else "ch")
    return None


def check_rst(h, regs, vf, text, problems):
    base = {"abs": 0, "vf": 0, "ctx": h["PLDMA_CTX_BASE"],
            "ch": h["PLDMA_CTX_BASE"] + h["PLDMA_CH_BASE"],
            "chnet": h["PLDMA_CTX_BASE"] + h["PLDMA_CH_NET_BASE"]}
    seen = set()
    for path, rows in rst_tables(text):
        for off, name, line in rows:
            m = re.fullmatch(r"(\w+)\[(\d+)\]", name)
            got = rst_macro(path, m.group(1) if m else name)
            if got is None:
                problems.append(f"pldma-registers.rst:{line}: table under {path} is not a known block")
                continue
            macro, block = got
            table = vf if block == "vf" else regs
            if m and macro not in table:  # An array: its first element's macro is NAME_BASE.
                macro += "_BASE"
            if macro not in table:
                problems.append(f"pldma-registers.rst:{line}: {name} is not a register of the header ({macro})")
                continue
            if base[block] + off != table[macro]:
                problems.append(f"pldma-registers.rst:{line}: {name} at {off:#x}, the header says "
                                f"{table[macro] - base[block]:#x}")
            seen.add(macro)
    for macro in sorted(set(regs) | set(vf)):
        if macro not in seen:
            problems.append(f"pldma-registers.rst: no table row for the header's {macro}")


def driver_registers(text):
    """[(name, offset, [(hi, lo, field)], line)] of a file's `register!` blocks."""
    out = []
    for m in re.finditer(r"pub\(crate\) (\w+)\(u32\)(?:\[[^\]]*\])? @ (0x[0-9a-fA-F]+) \{(.*?)\}",
                         text, re.S):
        fields = [(int(f.group(1)), int(f.group(2)), f.group(3))
                  for f in re.finditer(r"(\d+):(\d+) (\w+)", m.group(3))]
        out.append((m.group(1), int(m.group(2), 16), fields, text[:m.start()].count("\n") + 1))
    return out


def driver_macro(name, regs):
    """The header register a driver register names, trying each block's prefix."""
    cands = ["PLDMA_" + name, "PLDMA_CTX_" + name]
    if name.startswith("CH_NET_"):
        cands.insert(0, "PLDMA_CH_NET_" + name[len("CH_NET_"):])
    elif name.startswith("CH_"):
        cands.insert(0, "PLDMA_CH_" + name[3:])
    if f"PLDMA_{name}_BASE" in COUNTER_BLOCKS:
        cands.insert(0, f"PLDMA_{name}_BASE")
    return next((c for c in cands if c in regs), None)


def check_driver(h, regs, files, problems):
    declared = set()
    for f in files:
        rel = f.relative_to(TOP)
        for name, off, fields, line in driver_registers(f.read_text()):
            macro = driver_macro(name, regs)
            if macro is None:
                problems.append(f"{rel}:{line}: {name} is not a register of the header")
                continue
            declared.add(macro)
            if off != regs[macro]:
                problems.append(f"{rel}:{line}: {name} at {off:#x}, the header's {macro} is at "
                                f"{regs[macro]:#x}")
            check_fields(h, name, fields, f"{rel}:{line}", problems)
    for macro in sorted(set(regs) - declared - set(UNUSED)):
        problems.append(f"driver: no register! declaration of the header's {macro} "
                        "(declare it, or list it in tests/lint/regmap.py's UNUSED with why)")
    for macro in sorted(set(UNUSED) & declared):
        problems.append(f"regmap.py: {macro} is declared by the driver but listed as unused")


def mask(hi, lo):
    return ((1 << (hi - lo + 1)) - 1) << lo


def check_fields(h, name, fields, where, problems):
    table = FIELDS.get(name)
    if table is None:
        if len(fields) > 1:
            problems.append(f"{where}: {name} has fields but no FIELDS entry in regmap.py")
        return
    have = {f: mask(hi, lo) for hi, lo, f in fields}
    for f in sorted(set(table) - set(have)):
        problems.append(f"{where}: {name} lacks the field {f} ({table[f]})")
    for f in sorted(set(have) - set(table)):
        problems.append(f"{where}: field {f} of {name} is not in regmap.py's FIELDS")
    for f in sorted(set(have) & set(table)):
        want = table[f]
        if isinstance(want, str):
            if want not in h:
                problems.append(f"{where}: field {f} of {name}: the header has no {want}")
                continue
            want_v = h[want]
        else:
            want_v = want
        if have[f] != want_v:
            problems.append(f"{where}: field {f} of {name} is {have[f]:#x}, the header's "
                            f"{want} is {want_v:#x}")


def check_field_families(h, problems):
    named = {m for t in FIELDS.values() for m in t.values() if isinstance(m, str)}
    for n in sorted(h):
        if FIELD_FAMILIES.match(n) and not NOT_FIELDS.search(n) and n not in named:
            v = h[n]
            # Values of a field (states, errors, kinds) are not fields: masks and bits are.
            if n.endswith("_MASK") or (v > 0 and v & (v - 1) == 0):
                problems.append(f"header: {n} ({v:#x}) is no driver register's field "
                                "(declare it, and add it to regmap.py's FIELDS)")


def main(argv):
    h = regtable.load()
    regs, vf = header_registers(h)
    problems = []
    check_rst(h, regs, vf, (TOP / "Documentation/pldma-registers.rst").read_text(), problems)
    check_driver(h, regs, [TOP / "drivers/hw/regs.rs", TOP / "drivers/hw/netregs.rs"], problems)
    check_field_families(h, problems)
    for p in problems:
        print(p)
    print(f"register map: {len(regs) + len(vf)} header registers, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
