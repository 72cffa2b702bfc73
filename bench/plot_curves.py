#!/usr/bin/env python3
"""Tuning curves as a PNG, with numpy only (no matplotlib): lines are rasterized into an RGB array
and the PNG is encoded with zlib + struct.

    python3 plot_curves.py tuning_curves.csv tuning_curves.png [--trials N]

The CSV is bench_tuning's (layer,explorer,trial,best_gflops). One small plot per layer in a grid
(4 columns), best GFLOP/s (y, from 0) against trials measured (x, 1..N), one colored curve per
explorer, and a legend on top. Text uses a built-in 5x7 pixel font, drawn at 2x.
"""
import argparse
import csv
import struct
import sys
import zlib

import numpy as np

# 5x7 font: each glyph is 7 rows of 5 bits (MSB = leftmost column).
FONT = {
    " ": [0, 0, 0, 0, 0, 0, 0],
    "0": [14, 17, 19, 21, 25, 17, 14], "1": [4, 12, 4, 4, 4, 4, 14],
    "2": [14, 17, 1, 2, 4, 8, 31], "3": [31, 2, 4, 2, 1, 17, 14],
    "4": [2, 6, 10, 18, 31, 2, 2], "5": [31, 16, 30, 1, 1, 17, 14],
    "6": [6, 8, 16, 30, 17, 17, 14], "7": [31, 1, 2, 4, 8, 8, 8],
    "8": [14, 17, 17, 14, 17, 17, 14], "9": [14, 17, 17, 15, 1, 2, 12],
    ".": [0, 0, 0, 0, 0, 12, 12], "-": [0, 0, 0, 31, 0, 0, 0], "+": [0, 4, 4, 31, 4, 4, 0],
    "/": [1, 1, 2, 4, 8, 16, 16], ":": [0, 12, 12, 0, 12, 12, 0], ",": [0, 0, 0, 0, 12, 4, 8],
    "(": [2, 4, 8, 8, 8, 4, 2], ")": [8, 4, 2, 2, 2, 4, 8], "=": [0, 0, 31, 0, 31, 0, 0],
    "x": [0, 0, 17, 10, 4, 10, 17], "%": [24, 25, 2, 4, 8, 19, 3],
    "A": [14, 17, 17, 31, 17, 17, 17], "B": [30, 17, 17, 30, 17, 17, 30],
    "C": [14, 17, 16, 16, 16, 17, 14], "D": [30, 17, 17, 17, 17, 17, 30],
    "E": [31, 16, 16, 30, 16, 16, 31], "F": [31, 16, 16, 30, 16, 16, 16],
    "G": [14, 17, 16, 23, 17, 17, 15], "H": [17, 17, 17, 31, 17, 17, 17],
    "I": [14, 4, 4, 4, 4, 4, 14], "J": [7, 2, 2, 2, 2, 18, 12],
    "K": [17, 18, 20, 24, 20, 18, 17], "L": [16, 16, 16, 16, 16, 16, 31],
    "M": [17, 27, 21, 21, 17, 17, 17], "N": [17, 17, 25, 21, 19, 17, 17],
    "O": [14, 17, 17, 17, 17, 17, 14], "P": [30, 17, 17, 30, 16, 16, 16],
    "Q": [14, 17, 17, 17, 21, 18, 13], "R": [30, 17, 17, 30, 20, 18, 17],
    "S": [15, 16, 16, 14, 1, 1, 30], "T": [31, 4, 4, 4, 4, 4, 4],
    "U": [17, 17, 17, 17, 17, 17, 14], "V": [17, 17, 17, 17, 17, 10, 4],
    "W": [17, 17, 17, 21, 21, 21, 10], "X": [17, 17, 10, 4, 10, 17, 17],
    "Y": [17, 17, 10, 4, 4, 4, 4], "Z": [31, 1, 2, 4, 8, 16, 31],
}
COLORS = {"xgb": (214, 39, 40), "random": (31, 119, 180), "ga": (44, 160, 44)}
LABELS = {"xgb": "XGBOOST+SA", "random": "RANDOM", "ga": "GENETIC"}
BLACK, GRAY, LIGHT = (0, 0, 0), (120, 120, 120), (225, 225, 225)
SCALE = 2  # font pixel size
CHAR_W, CHAR_H = 6 * SCALE, 7 * SCALE


def text(img, x, y, s, color=BLACK, vertical=False):
    """Draws s with its top-left corner at (x, y); vertical: rotated 90 degrees counterclockwise."""
    for i, ch in enumerate(s.upper()):
        rows = FONT.get(ch, FONT[" "])
        for r, bits in enumerate(rows):
            for c in range(5):
                if bits & (1 << (4 - c)):
                    if vertical:  # reading bottom to top
                        px, py = x + r * SCALE, y - (i * 6 + c) * SCALE
                    else:
                        px, py = x + (i * 6 + c) * SCALE, y + r * SCALE
                    img[max(py, 0):max(py + SCALE, 0), max(px, 0):max(px + SCALE, 0)] = color


def text_width(s):
    return len(s) * CHAR_W


def line(img, x0, y0, x1, y1, color, width=2):
    """A line by dense sampling, `width` pixels thick."""
    n = int(max(abs(x1 - x0), abs(y1 - y0))) * 2 + 1
    xs = np.linspace(x0, x1, n)
    ys = np.linspace(y0, y1, n)
    h, w, _ = img.shape
    for dx in range(width):
        for dy in range(width):
            xi = np.clip(np.round(xs).astype(int) + dx - width // 2, 0, w - 1)
            yi = np.clip(np.round(ys).astype(int) + dy - width // 2, 0, h - 1)
            img[yi, xi] = color


def nice_max(v):
    """A round axis maximum >= v."""
    if v <= 0:
        return 1.0
    mag = 10 ** np.floor(np.log10(v))
    for m in (1, 2, 2.5, 3, 4, 5, 10):
        if m * mag >= v:
            return m * mag
    return 10 * mag


def fmt(v):
    return ("%.0f" % v) if v >= 10 or v == int(v) else ("%.1f" % v)


def write_png(path, img):
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n"
    png += chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9))
    png += chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--trials", type=int, default=0, help="x axis length (default: longest curve)")
    args = ap.parse_args()

    curves = {}  # layer -> explorer -> list of (trial, gflops)
    order = []
    with open(args.csv) as f:
        for row in csv.DictReader(f):
            layer = row["layer"]
            if layer not in curves:
                curves[layer] = {}
                order.append(layer)
            curves[layer].setdefault(row["explorer"], []).append(
                (int(row["trial"]), float(row["best_gflops"])))
    if not order:
        sys.exit("plot_curves.py: no data in " + args.csv)
    explorers = [e for e in ("xgb", "random", "ga") if any(e in c for c in curves.values())]
    explorers += sorted({e for c in curves.values() for e in c} - set(explorers))
    max_trial = args.trials or max(t for c in curves.values() for pts in c.values() for t, _ in pts)

    cols = min(4, len(order))
    rows = (len(order) + cols - 1) // cols
    pw, ph = 360, 250              # one panel
    ml, mr, mt, mb = 80, 16, 34, 50  # panel margins: y labels, right, title, x labels
    top = 70                       # legend band
    W, H = cols * pw, top + rows * ph
    img = np.full((H, W, 3), 255, dtype=np.uint8)

    title = "BEST GFLOP/S VS TRIALS (RESNET-18 CONV LAYERS, 1 THREAD)"
    text(img, (W - text_width(title)) // 2, 8, title)
    lx = (W - sum(text_width(LABELS.get(e, e)) + 60 for e in explorers)) // 2
    for e in explorers:
        color = COLORS.get(e, GRAY)
        line(img, lx, 45, lx + 34, 45, color, width=4)
        text(img, lx + 42, 39, LABELS.get(e, e), color)
        lx += text_width(LABELS.get(e, e)) + 60

    for i, layer in enumerate(order):
        ox, oy = (i % cols) * pw, top + (i // cols) * ph
        x0, x1 = ox + ml, ox + pw - mr
        y0, y1 = oy + mt, oy + ph - mb  # y0 top of the plot area, y1 its bottom
        ymax = 4 * nice_max(max(g for pts in curves[layer].values() for _, g in pts) * 1.05 / 4)
        text(img, (x0 + x1 - text_width(layer)) // 2, oy + 10, layer)
        for k in range(5):  # grid and y ticks
            v = ymax * k / 4
            y = y1 - (y1 - y0) * k / 4
            line(img, x0, y, x1, y, LIGHT, width=1)
            s = fmt(v)
            text(img, x0 - 8 - text_width(s), int(y) - CHAR_H // 2, s)
        xticks = sorted({1, max_trial // 4, max_trial // 2, 3 * max_trial // 4, max_trial} - {0})
        for t in xticks:
            x = x0 + (x1 - x0) * (t - 1) / max(max_trial - 1, 1)
            line(img, x, y1, x, y1 + 5, BLACK, width=1)
            s = str(t)
            text(img, int(x) - text_width(s) // 2, y1 + 9, s)
        line(img, x0, y0, x0, y1, BLACK, width=1)
        line(img, x0, y1, x1, y1, BLACK, width=1)
        text(img, (x0 + x1 - text_width("TRIALS")) // 2, y1 + 30, "TRIALS")
        text(img, ox + 4, (y0 + y1) // 2 + text_width("GFLOP/S") // 2, "GFLOP/S", vertical=True)
        for e in explorers:
            pts = curves[layer].get(e)
            if not pts:
                continue
            color = COLORS.get(e, GRAY)
            prev = None
            for t, g in pts:  # a step curve: the best so far
                x = x0 + (x1 - x0) * (t - 1) / max(max_trial - 1, 1)
                y = y1 - (y1 - y0) * min(g / ymax, 1.0)
                if prev is not None:
                    line(img, prev[0], prev[1], x, prev[1], color)
                    line(img, x, prev[1], x, y, color)
                prev = (x, y)
            if len(pts) == 1:
                line(img, prev[0], prev[1], prev[0] + 2, prev[1], color)
    write_png(args.png, img)


if __name__ == "__main__":
    main()
