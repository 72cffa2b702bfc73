#!/usr/bin/env python3
"""The VDLA's roofline (the paper's Fig. 10) as a PNG, with numpy only (plot_curves.py's drawing).

    python3 plot_roofline.py roofline.csv roofline.png --peak-gops P --dram-gbs B

The CSV is bench_vdla's (layer,ops,dram_bytes,gops_serial,gops_vthread): per layer its arithmetic
intensity (ops per DRAM byte, x) and its throughput (GOPS, y) without and with latency hiding, on
log-log axes under the roofline min(P, B * intensity). Serial points are hollow, two-thread points
filled, each pair joined by a line.
"""
import argparse
import csv
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_curves import BLACK, line, text, text_width, write_png  # noqa: E402

GRID = (225, 225, 225)
ROOF = (90, 90, 90)
SERIAL = (31, 119, 180)
VTHREAD = (214, 39, 40)


def dot(img, x, y, color, filled):
    h, w, _ = img.shape
    for dy in range(-5, 6):
        for dx in range(-5, 6):
            r2 = dx * dx + dy * dy
            if r2 <= 25 and (filled or r2 >= 12) and 0 <= y + dy < h and 0 <= x + dx < w:
                img[y + dy, x + dx] = color


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--peak-gops", type=float, required=True)
    ap.add_argument("--dram-gbs", type=float, required=True)
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.csv)))
    if not rows:
        sys.exit("plot_roofline.py: no data in " + args.csv)
    pts = [(r["layer"], float(r["ops"]) / float(r["dram_bytes"]), float(r["gops_serial"]),
            float(r["gops_vthread"])) for r in rows]
    ridge = args.peak_gops / args.dram_gbs
    x_lo = 10 ** math.floor(math.log10(min(min(p[1] for p in pts), ridge) / 2))
    x_hi = 10 ** math.ceil(math.log10(max(max(p[1] for p in pts), ridge) * 2))
    y_lo = 10 ** math.floor(math.log10(min(min(p[2] for p in pts), x_lo * args.dram_gbs)))
    y_hi = 10 ** math.ceil(math.log10(args.peak_gops * 1.5))
    W, H, ml, mr, mt, mb = 900, 600, 90, 30, 60, 70
    img = np.full((H, W, 3), 255, dtype=np.uint8)

    def px(x):
        return int(ml + (math.log10(x) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (W - ml - mr))

    def py(y):
        return int(H - mb - (math.log10(y) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)) * (H - mt - mb))

    for e in range(int(math.log10(x_lo)), int(math.log10(x_hi)) + 1):
        line(img, px(10 ** e), mt, px(10 ** e), H - mb, GRID, 1)
        label = "%g" % (10 ** e)
        text(img, px(10 ** e) - text_width(label) // 2, H - mb + 10, label)
    for e in range(int(math.log10(y_lo)), int(math.log10(y_hi)) + 1):
        line(img, ml, py(10 ** e), W - mr, py(10 ** e), GRID, 1)
        label = "%g" % (10 ** e)
        text(img, ml - 10 - text_width(label), py(10 ** e) - 7, label)
    line(img, ml, H - mb, W - mr, H - mb, BLACK, 2)
    line(img, ml, mt, ml, H - mb, BLACK, 2)
    # The roof: bandwidth-bound up to the ridge point, then the compute peak.
    line(img, px(x_lo), py(x_lo * args.dram_gbs), px(ridge), py(args.peak_gops), ROOF, 3)
    line(img, px(ridge), py(args.peak_gops), px(x_hi), py(args.peak_gops), ROOF, 3)
    text(img, px(ridge) + 10, py(args.peak_gops) - 22, "PEAK %g GOPS" % args.peak_gops, ROOF)
    for name, x, g1, g2 in pts:
        line(img, px(x), py(g1), px(x), py(g2), (160, 160, 160), 1)
        dot(img, px(x), py(g1), SERIAL, False)
        dot(img, px(x), py(g2), VTHREAD, True)
        text(img, px(x) + 8, py(g2) + 4, name, BLACK)
    text(img, ml, 12, "VDLA ROOFLINE: HOLLOW = 1 THREAD, FILLED = 2 VIRTUAL THREADS", BLACK)
    text(img, W // 2 - text_width("OPS PER DRAM BYTE") // 2, H - 30, "OPS PER DRAM BYTE")
    text(img, 8, mt - 30, "GOPS")
    write_png(args.png, img)
    return 0


if __name__ == "__main__":
    sys.exit(main())
