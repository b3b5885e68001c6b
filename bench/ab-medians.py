#!/usr/bin/env python3
"""Medians of bench/run-restore-ab.sh's lines (stdin): per input, threads and
build, the verified restore of the default codec and of compact (CPU and wall
seconds) and compact's restore speed relative to the default's."""
import json, statistics, sys
from collections import defaultdict

rows = defaultdict(list)
for line in sys.stdin:
    if line.startswith("{"):
        d = json.loads(line)
        rows[(d["input"], d["threads"], d["build"])].append(d)
print("| input | threads | build | n | restore CPU default / compact (ms) | speed CPU | restore wall default / compact (ms) | speed wall |")
print("|---|---|---|---|---|---|---|---|")
for (inp, t, b), ds in sorted(rows.items()):
    med = lambda f: statistics.median(f(d) for d in ds)
    dc, cc = med(lambda d: d["default"]["verified_restore_cpu_s"]), med(lambda d: d["compact"]["verified_restore_cpu_s"])
    dw, cw = med(lambda d: d["default"]["verified_restore_s"]), med(lambda d: d["compact"]["verified_restore_s"])
    sc = med(lambda d: d["compact_vs_default_restore_speed_cpu"])
    sw = med(lambda d: d["compact_vs_default_restore_speed"])
    print(f"| {inp} | {t} | {b} | {len(ds)} | {dc*1e3:.1f} / {cc*1e3:.1f} | {sc:.3f} | {dw*1e3:.1f} / {cw*1e3:.1f} | {sw:.3f} |")
