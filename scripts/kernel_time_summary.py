#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel times (ncu --csv --metrics gpu__time_duration.sum
--print-units base) by kernel name and prints them largest first, per step.
Usage: kernel_time_summary.py NCU_CSV STEPS"""
import csv, sys
from collections import defaultdict

path, steps = sys.argv[1], int(sys.argv[2])
rows = [line for line in open(path, errors="replace") if line.startswith('"')]
total, count = defaultdict(float), defaultdict(int)
for r in csv.DictReader(rows):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = r["Kernel Name"].split("(")[0][:90]
    total[name] += float(r["Metric Value"].replace(",", "")) / 1e6  # ns -> ms
    count[name] += 1
whole = sum(total.values())
print(f"{sum(count.values())} kernels, {whole / steps:.2f} ms of GPU time per step ({steps} steps)")
for name, ms in sorted(total.items(), key=lambda kv: -kv[1]):
    print(f"{ms / steps:9.3f} ms/step {100 * ms / whole:5.1f}% {count[name] / steps:6.1f}x  {name}")
