"""Per-kernel time from an ncu CSV (--metrics gpu__time_duration.sum --csv), grouped by kernel
name (template arguments dropped), largest first, with launches, total ms and share. Kernels of
parameter initialization (init_normal) are left out so a profile of setup + one step shows the
step. usage: ncu_breakdown.py FILE.csv [TOP]"""
import collections
import csv
import re
import sys


def short(name):
    name = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    name = re.sub(r"^void ", "", name)
    return re.sub(r"[<(].*", "", name).strip()[:70]


def main():
    rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
    head, body = rows[0], rows[1:]
    ki, vi, ui = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
    scale = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}
    total = collections.Counter()
    count = collections.Counter()
    for r in body:
        if "init_normal" in r[ki]:
            continue
        k = short(r[ki])
        total[k] += float(r[vi].replace(",", "")) * scale.get(r[ui], 1e-6)
        count[k] += 1
    whole = sum(total.values())
    print(f"ncu: {sum(count.values())} kernels, {whole:.2f} ms")
    for k, ms in total.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 25):
        print(f"{ms:8.2f} ms {100 * ms / whole:5.1f}% {count[k]:5d}  {k}")


if __name__ == "__main__":
    main()
