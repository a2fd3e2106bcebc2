#!/usr/bin/env python3
"""The side-by-side speed table of issue 26 from the logs of scripts/gpu/speed_table_all.sh.

Reads LOGS/<row>.log for the seven rows (GPT-2 124M, 350M, GPT 1.3B, BERT-large, T5-base,
llama_1b, bloom_560m) and prints one markdown table: anvil's tokens/s, MFU and GPU memory next to
the PyTorch references' eager and torch.compile tokens/s and peak memory, the better PyTorch mode,
anvil's ratio to it and the issue's target. A value that is missing prints as "—" with the reason
(OOM, timed out, error, skipped, not run); the full error lines follow the table as notes. Never
fails on a bad or missing log: a row without a log reads "not run".

A row log is what speed_table_all.sh writes: a header line, then one segment per part, each the
tool's own output between marker lines:
  === speed_table_all: row KEY | shape B x T | date D | commit C | device NAME | run ID ===
  === speed_table_all: begin PART ===          PART: "prepare WHAT", "anvil", "pytorch MODES"
  ... the tool's stdout and stderr ...
  === speed_table_all: end PART | exit RC | S s ===
  === speed_table_all: skip PART | REASON ===
The result lines it reads, in each tool's own format:
  gpt_step_bench (Google Benchmark 1.7 console reporter, counters sorted by name):
    gpt_step/124M_B32_T1024/iterations:10/manual_time  64.2 ms  64.1 ms  10 GiB=30.4453
        MFU%=44.9137/s TFLOP/s=444.197/s tokens/s=510.23k/s
    gpt_step/1p3B_B16_T2048/iterations:3/manual_time ERROR OCCURRED: 'message'
  bin/train (model/train/trainer.cc), the last step's log line:
    [anvil 15:25:08] step 8/8 | loss 7.1234 | lr 3.000e-04 | grad norm 1.234 | 51.6k tok/s |
        206 TFLOP/s/GPU | MFU 20.8% | mem 12.3 GiB (GPU used 40.2 GiB of 79.1 GiB) | ...
  bench/reference/gpt2_pytorch.py, hf_bert.py, hf_t5.py, hf_causal_lm.py:
    pytorch-compile: 66.1 ms/step  495,123 tokens/s  ... peak mem 21.3 GiB  loss 10.9
    hf-t5-v1.0-eager: 130.2 ms/step  153,812 tokens/s  peak mem 30.1 GiB  loss 10.4

usage: speed_table_format.py LOGS_DIR
"""
import os
import re
import sys

DASH = "\u2014"

# key, label, default B x T, anvil source, gpt_step_bench name, target ratio.
ROWS = [
    ("124M", "GPT-2 124M", "32 x 1024", "bench", "124M", 1.25),
    ("350M", "GPT-2 350M", "16 x 1024", "bench", "350M", 1.25),
    ("1.3B", "GPT 1.3B, d 2048, 16 heads", "16 x 2048", "bench", "1p3B", 1.15),
    ("BERT", "BERT-large", "32 x 512", "bench", "BERT_large", 1.25),
    ("T5", "T5-base", "32 x 512/114", "train", None, 1.25),
    ("llama_1b", "llama_1b", "8 x 2048", "train", None, 1.2),
    ("bloom_560m", "bloom_560m", "4 x 2048", "train", None, 1.4),
]
MODES = ("eager", "compile")

MARK = re.compile(r"^=== speed_table_all: (row|begin|end|skip) (.*?) ===\s*$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BENCH = re.compile(r"^gpt_step/(\w+?)_B(\d+)_T(\d+)\S*\s+(.*)$")
TRAIN = re.compile(r"\bstep +(\d+)/(\d+) \| loss .*?\| ([\d.]+[kMG]?) tok/s \|.*?\| MFU ([\d.]+%|-)"
                   r" \| mem ([\d.]+ \w+)(?: \(GPU used ([\d.]+ \w+) of)?")
TORCH = re.compile(r"^(pytorch|hf-\S+)-(\w+): ([\d.]+) ms/step\s+([\d,]+) tokens/s"
                   r".*?peak mem ([\d.]+) GiB")
OOM = re.compile(r"out of memory|OutOfMemory|memory plan needs|cudaMalloc of .* failed"
                 r"|cudaErrorMemoryAllocation", re.I)
ERROR = re.compile(r"error|fatal|abort|what\(\)|Traceback|No such file|not found", re.I)
SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6}
BYTES = {"B": 2.0**-30, "KiB": 2.0**-20, "MiB": 2.0**-10, "GiB": 1.0, "TiB": 2.0**10}


class Segment:
    """One part of a row log: its name, output lines, exit status and seconds (or a skip)."""

    def __init__(self, part):
        self.part = part
        self.lines = []
        self.rc = None
        self.secs = None
        self.skip = None


def parse_si(text):
    """'510.23k' -> 510230.0, '44.9137' -> 44.9137; None when it is no number."""
    m = re.match(r"^([\d.]+(?:e[+-]?\d+)?)([kKMGTmu]?)$", text)
    return float(m.group(1)) * SI[m.group(2)] if m else None


def parse_bytes(text):
    """'40.2 GiB' -> 40.2 and '512 MiB' -> 0.5 (GiB); None when it is no size."""
    m = re.match(r"^([\d.]+) (\w+)$", text or "")
    return float(m.group(1)) * BYTES[m.group(2)] if m and m.group(2) in BYTES else None


def read_log(path):
    """(header dict, [Segment]) of one row log; ({}, []) when it is missing."""
    header, segments, current = {}, [], None
    try:
        with open(path, errors="replace") as f:
            lines = [ANSI.sub("", line.rstrip("\n")) for line in f]
    except OSError:
        return header, segments
    for line in lines:
        m = MARK.match(line)
        if not m:
            if current is not None:
                current.lines.append(line)
            continue
        kind, fields = m.group(1), [x.strip() for x in m.group(2).split("|")]
        if kind == "row":
            header["key"] = fields[0]
            for field in fields[1:]:
                name, _, value = field.partition(" ")
                header[name] = value
        elif kind == "begin":
            current = Segment(fields[0])
            segments.append(current)
        elif kind == "end" and current is not None:
            for field in fields[1:]:
                if field.startswith("exit "):
                    current.rc = int(field[5:]) if field[5:].lstrip("-").isdigit() else None
                elif field.endswith(" s"):
                    current.secs = field[:-2]
            current = None
        elif kind == "skip":
            seg = Segment(fields[0])
            seg.skip = " | ".join(fields[1:]) or "skipped"
            segments.append(seg)
    return header, segments


def error_line(seg):
    """The last line of the segment that reads like an error, without the log prefix."""
    for line in reversed(seg.lines):
        if ERROR.search(line) and not line.lstrip().startswith("File "):
            return re.sub(r"^\[anvil [^\]]*\] ", "", line).strip()
    return ""


def why(seg):
    """(short reason for a table cell, full detail for the notes) of a part that gave no result."""
    if seg is None:
        return "not run", ""
    if seg.skip is not None:
        return "skipped: " + seg.skip, ""
    text = "\n".join(seg.lines)
    detail = error_line(seg)
    if OOM.search(text):
        oom = next((l.strip() for l in reversed(seg.lines) if OOM.search(l)), detail)
        return "OOM", re.sub(r"^\[anvil [^\]]*\] ", "", oom)
    if seg.rc in (124, 137):
        return "timed out after %s s" % seg.secs, detail
    if seg.rc is None and seg.secs is None:
        return "killed or unfinished", detail
    if seg.rc == 0:
        return "no result line", detail
    return "error, exit %s" % seg.rc, detail


def anvil_result(kind, bench_name, segments):
    """{'tok': tokens/s, 'mfu': %, 'gib': GPU GiB, 'shape': 'B x T'} or {'why': ..., 'detail': ...}."""
    prepare_failed = [s for s in segments if s.part.startswith("prepare")
                      and (s.skip is not None or s.rc != 0)]
    runs = [s for s in segments if s.part == "anvil"]
    for seg in reversed(runs):
        for line in seg.lines:
            got = parse_bench(line, bench_name) if kind == "bench" else parse_train(line)
            if got:
                return got
    if not runs and prepare_failed:
        reason, detail = why(prepare_failed[-1])
        return {"why": "data not prepared (%s)" % reason, "detail": detail}
    reason, detail = why(runs[-1] if runs else None)
    return {"why": reason, "detail": detail}


def parse_bench(line, bench_name):
    """The counters of gpt_step_bench's line for bench_name, or None."""
    m = BENCH.match(line.strip())
    if not m or m.group(1) != bench_name:
        return None
    shape = "%s x %s" % (m.group(2), m.group(3))
    rest = m.group(4)
    if rest.startswith("ERROR OCCURRED"):
        msg = re.sub(r"^ERROR OCCURRED: '(.*)'$", r"\1", rest)
        return {"why": "OOM" if OOM.search(msg) else "error", "detail": msg, "shape": shape}
    # Rate counters carry a "/s" unit: tokens/s=510.23k/s, MFU%=44.9137/s; GiB=30.4453 none.
    counters = {name: parse_si(re.sub(r"/s$", "", value))
                for name, value in re.findall(r"(\S+)=(\S+)", rest)}
    if counters.get("tokens/s") is None:
        return None
    return {"tok": counters["tokens/s"], "mfu": counters.get("MFU%"), "gib": counters.get("GiB"),
            "shape": shape}


def parse_train(line):
    """tokens/s, MFU and GPU memory of bin/train's final step line, or None."""
    m = TRAIN.search(line)
    if not m or m.group(1) != m.group(2):
        return None
    mfu = m.group(4)
    gib = parse_bytes(m.group(6)) if m.group(6) else parse_bytes(m.group(5))
    return {"tok": parse_si(m.group(3)), "mfu": float(mfu[:-1]) if mfu != "-" else None,
            "gib": gib}


def torch_results(segments):
    """{mode: {'tok', 'gib'} or {'why', 'detail'}} over the row's PyTorch parts, in log order.

    One process runs the modes in order, so in a part without a result for every mode the first
    mode without one is where it died (its reason), and the later ones never started (the
    script runs them again in a part of their own)."""
    out = {}

    def put(mode, r):  # a result, once there, stays
        if "tok" not in out.get(mode, {}):
            out[mode] = r

    for seg in (s for s in segments if s.part.startswith("pytorch")):
        modes = seg.part.split(" ", 1)[1].split(",") if " " in seg.part else []
        got = {}
        for line in seg.lines:
            m = TORCH.match(line.strip())
            if m:
                got[m.group(2)] = {"tok": float(m.group(4).replace(",", "")),
                                   "gib": float(m.group(5))}
        died = False
        for mode in modes:
            if mode in got:
                put(mode, got[mode])
            elif seg.skip is not None:
                put(mode, {"why": "skipped: " + seg.skip, "detail": ""})
            elif not died:
                died = True
                reason, detail = why(seg)
                put(mode, {"why": reason, "detail": detail})
            elif mode not in out:
                out[mode] = {"why": "not run", "detail": ""}
        for mode, r in got.items():
            put(mode, r)
    return out


def kilo(tok):
    return "%.1fK" % (tok / 1e3)


def missing(reason):
    return "%s (%s)" % (DASH, reason.replace("|", "/"))


def torch_cell(r):
    if r is None:
        return missing("not run")
    if "tok" not in r:
        return missing(r["why"])
    return "%s, %.1f GiB" % (kilo(r["tok"]), r["gib"])


def target_cell(ratio, target):
    text = ">= %g" % target
    if ratio is None:
        return text
    if ratio >= target:
        return text + " (met)"
    return text + " (short by %.2f)" % (target - ratio)


def format_row(spec, header, segments, notes):
    """One markdown row; appends the row's error details to notes."""
    key, label, shape, kind, bench_name, target = spec
    anvil = anvil_result(kind, bench_name, segments) if segments else \
        {"why": "not run", "detail": ""}
    shape = anvil.get("shape") or header.get("shape") or shape
    torch = torch_results(segments)
    cells = ["%s (%s)" % (label, shape)]
    if "tok" in anvil:
        cells += [kilo(anvil["tok"]),
                  "%.1f%%" % anvil["mfu"] if anvil.get("mfu") is not None else DASH,
                  "%.1f" % anvil["gib"] if anvil.get("gib") is not None else DASH]
    else:
        cells += [missing(anvil["why"]), DASH, DASH]
        if anvil.get("detail"):
            notes.append("%s anvil: %s" % (key, anvil["detail"]))
    for mode in MODES:
        cells.append(torch_cell(torch.get(mode)))
        r = torch.get(mode) or {}
        if r.get("detail"):
            notes.append("%s PyTorch %s: %s" % (key, mode, r["detail"]))
    ran = [(r["tok"], mode) for mode, r in torch.items() if "tok" in r]
    best = max(ran, key=lambda t: t[0]) if ran else None
    ratio = anvil["tok"] / best[0] if best and "tok" in anvil else None
    cells.append("%s %s" % (best[1], kilo(best[0])) if best else DASH)
    cells.append("%.2f" % ratio if ratio is not None else DASH)
    cells.append(target_cell(ratio, target))
    return "| " + " | ".join(cells) + " |"


def provenance(headers):
    """'2026-12-07T10:00Z on NVIDIA H100 80GB HBM3, commit abc1234', one per distinct run: rows
    of one invocation of speed_table_all.sh share its run id (their dates may differ by
    minutes); headers without one (older logs) count as a run per date, device and commit."""
    runs = {}
    for h in headers:
        if not h:
            continue
        text = "%s on %s, commit %s" % (h.get("date", "?"), h.get("device", "?"),
                                        h.get("commit", "?"))
        runs.setdefault(h.get("run") or text, text)
    return list(runs.values())


def table(logs_dir):
    """The whole report (table, provenance, notes) as one string."""
    headers, lines, notes = [], [], []
    for spec in ROWS:
        header, segments = read_log(os.path.join(logs_dir, spec[0] + ".log"))
        headers.append(header)
        lines.append(format_row(spec, header, segments, notes))
    out = ["| model (B x T) | anvil tokens/s | anvil MFU | anvil GPU GiB | PyTorch eager "
           "(peak GiB) | torch.compile (peak GiB) | best PyTorch | ratio | target |",
           "|---|---|---|---|---|---|---|---|---|"] + lines
    runs = provenance(headers)
    out.append("")
    if runs:
        out.append("Measured " + "; ".join(runs) + " (scripts/gpu/speed_table_all.sh)." +
                   (" **Rows from different runs.**" if len(runs) > 1 else ""))
    out.append("anvil GPU GiB: device memory in use after the steps (cudaMemGetInfo: context and "
               "arena included); PyTorch: torch.cuda.max_memory_allocated (no context, no cache). "
               "Ratio: anvil over the better PyTorch mode that ran. MFU: peak 989 TFLOP/s.")
    if notes:
        out.append("")
        out.append("Notes:")
        out += ["- " + n.replace("\n", " ")[:300] for n in notes]
    return "\n".join(out)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write("usage: speed_table_format.py LOGS_DIR\n")
        return 2
    if not os.path.isdir(argv[1]):
        sys.stderr.write("speed_table_format: %s is no directory of row logs "
                         "(scripts/gpu/speed_table_all.sh writes them)\n" % argv[1])
        return 2
    print(table(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
