#!/usr/bin/env python3
"""Parity plots (predicted vs reference) for the CSV files that `ddgnn evaluate` writes.

Usage:
    python3 jobs/parity_plot.py EVAL_DIR [--out FILE.png] [--title TEXT]

Reads, from EVAL_DIR:
  energies.csv  header exactly `graph,split,n_atoms,energy_ref_ev,energy_pred_ev`
                one row per structure; split is a word such as `test`; energies in eV.
  forces.csv    header exactly `graph,atom,z,fx_ref,fy_ref,fz_ref,fx_pred,fy_pred,fz_pred`
                one row per atom, forces in eV/A. Optional: when it is absent or has no rows
                (data without forces) only the energy panel is drawn. Likewise, when
                energies.csv has no rows (a model without an energy head) only the force
                panel is drawn; having neither is an error.

Writes a PNG (default EVAL_DIR/parity.png), RGB, 8 bit, 450 x 450 pixels per panel side by
side: 900 x 450 with both panels, 450 x 450 with one.
  panel 1  energy per atom in meV/atom, relative to the mean reference energy per atom
  panel 2  force components in eV/A, x, y and z pooled
Each panel has square axes with equal ranges, the y = x diagonal (red), the points (blue,
alpha-blended; at most MAX_POINTS drawn, by deterministic striding; the metrics use every
row), ticks with numeric labels, axis labels, and a title with MAE, RMSE (meV/atom, meV/A) and
the count. --title TEXT replaces the first title line of each panel ("TEXT - energy").
Text is drawn with a built-in 5x7 bitmap font; the PNG is encoded with zlib + struct only.

Prints the path written and the MAE/RMSE figures. Bad input (missing directory or file, wrong
header, wrong column count, a value that is not a finite number) gives a one-line error on
stderr naming the file and line, exit status 1, and no PNG: the image is written to a
temporary name first and renamed over the output with os.replace.

Only the Python 3 standard library is used.
"""

import argparse
import csv
import math
import os
import struct
import sys
import zlib
from array import array

ENERGY_HEADER = ["graph", "split", "n_atoms", "energy_ref_ev", "energy_pred_ev"]
FORCE_HEADER = ["graph", "atom", "z", "fx_ref", "fy_ref", "fz_ref", "fx_pred", "fy_pred", "fz_pred"]

MAX_POINTS = 200_000
PANEL = 450                      # each panel is PANEL x PANEL pixels
PLOT_LEFT, PLOT_TOP, PLOT_SIZE = 80, 56, 336   # plot area inside a panel

WHITE = (255, 255, 255)
BLACK = (0, 0, 0)
GRID_COLOR = (232, 232, 232)
TEXT_COLOR = (20, 20, 20)
POINT_COLOR = (31, 119, 180)
LINE_COLOR = (214, 39, 40)


class InputError(Exception):
    """Bad input; the message is printed as the one-line error."""


# ----------------------------------------------------------------------------------------------
# Bitmap font: 5 x 7 glyphs, '#' = ink. Characters not listed are drawn as '?'.
# ----------------------------------------------------------------------------------------------
_GLYPH_ROWS = {
    "0": ".###. #...# #..## #.#.# ##..# #...# .###.",
    "1": "..#.. .##.. ..#.. ..#.. ..#.. ..#.. .###.",
    "2": ".###. #...# ....# ...#. ..#.. .#... #####",
    "3": "##### ...#. ..#.. ...#. ....# #...# .###.",
    "4": "...#. ..##. .#.#. #..#. ##### ...#. ...#.",
    "5": "##### #.... ####. ....# ....# #...# .###.",
    "6": "..##. .#... #.... ####. #...# #...# .###.",
    "7": "##### ....# ...#. ..#.. .#... .#... .#...",
    "8": ".###. #...# #...# .###. #...# #...# .###.",
    "9": ".###. #...# #...# .#### ....# ...#. .##..",
    "A": ".###. #...# #...# ##### #...# #...# #...#",
    "B": "####. #...# #...# ####. #...# #...# ####.",
    "C": ".###. #...# #.... #.... #.... #...# .###.",
    "D": "###.. #..#. #...# #...# #...# #..#. ###..",
    "E": "##### #.... #.... ####. #.... #.... #####",
    "F": "##### #.... #.... ####. #.... #.... #....",
    "G": ".###. #...# #.... #.### #...# #...# .####",
    "H": "#...# #...# #...# ##### #...# #...# #...#",
    "I": ".###. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "J": "..### ...#. ...#. ...#. ...#. #..#. .##..",
    "K": "#...# #..#. #.#.. ##... #.#.. #..#. #...#",
    "L": "#.... #.... #.... #.... #.... #.... #####",
    "M": "#...# ##.## #.#.# #.#.# #...# #...# #...#",
    "N": "#...# #...# ##..# #.#.# #..## #...# #...#",
    "O": ".###. #...# #...# #...# #...# #...# .###.",
    "P": "####. #...# #...# ####. #.... #.... #....",
    "Q": ".###. #...# #...# #...# #.#.# #..#. .##.#",
    "R": "####. #...# #...# ####. #.#.. #..#. #...#",
    "S": ".#### #.... #.... .###. ....# ....# ####.",
    "T": "##### ..#.. ..#.. ..#.. ..#.. ..#.. ..#..",
    "U": "#...# #...# #...# #...# #...# #...# .###.",
    "V": "#...# #...# #...# #...# #...# .#.#. ..#..",
    "W": "#...# #...# #...# #.#.# #.#.# #.#.# .#.#.",
    "X": "#...# #...# .#.#. ..#.. .#.#. #...# #...#",
    "Y": "#...# #...# .#.#. ..#.. ..#.. ..#.. ..#..",
    "Z": "##### ....# ...#. ..#.. .#... #.... #####",
    "a": "..... ..... .###. ....# .#### #...# .####",
    "b": "#.... #.... #.##. ##..# #...# #...# ####.",
    "c": "..... ..... .###. #.... #.... #...# .###.",
    "d": "....# ....# .##.# #..## #...# #...# .####",
    "e": "..... ..... .###. #...# ##### #.... .###.",
    "f": "..##. .#..# .#... ###.. .#... .#... .#...",
    "g": "..... .#### #...# #...# .#### ....# .###.",
    "h": "#.... #.... #.##. ##..# #...# #...# #...#",
    "i": "..#.. ..... .##.. ..#.. ..#.. ..#.. .###.",
    "j": "...#. ..... ..##. ...#. ...#. #..#. .##..",
    "k": "#.... #.... #..#. #.#.. ##... #.#.. #..#.",
    "l": ".##.. ..#.. ..#.. ..#.. ..#.. ..#.. .###.",
    "m": "..... ..... ##.#. #.#.# #.#.# #...# #...#",
    "n": "..... ..... #.##. ##..# #...# #...# #...#",
    "o": "..... ..... .###. #...# #...# #...# .###.",
    "p": "..... ..... ####. #...# ####. #.... #....",
    "q": "..... ..... .##.# #..## .#### ....# ....#",
    "r": "..... ..... #.##. ##..# #.... #.... #....",
    "s": "..... ..... .###. #.... .###. ....# ####.",
    "t": ".#... .#... ###.. .#... .#... .#..# ..##.",
    "u": "..... ..... #...# #...# #...# #..## .##.#",
    "v": "..... ..... #...# #...# #...# .#.#. ..#..",
    "w": "..... ..... #...# #...# #.#.# #.#.# .#.#.",
    "x": "..... ..... #...# .#.#. ..#.. .#.#. #...#",
    "y": "..... ..... #...# #...# .#### ....# .###.",
    "z": "..... ..... ##### ...#. ..#.. .#... #####",
    " ": "..... ..... ..... ..... ..... ..... .....",
    ".": "..... ..... ..... ..... ..... .##.. .##..",
    ",": "..... ..... ..... ..... .##.. ..#.. .#...",
    ":": "..... .##.. .##.. ..... .##.. .##.. .....",
    "-": "..... ..... ..... ##### ..... ..... .....",
    "+": "..... ..#.. ..#.. ##### ..#.. ..#.. .....",
    "=": "..... ..... ##### ..... ##### ..... .....",
    "/": "..... ....# ...#. ..#.. .#... #.... .....",
    "(": "...#. ..#.. .#... .#... .#... ..#.. ...#.",
    ")": ".#... ..#.. ...#. ...#. ...#. ..#.. .#...",
    "[": ".###. .#... .#... .#... .#... .#... .###.",
    "]": ".###. ...#. ...#. ...#. ...#. ...#. .###.",
    "_": "..... ..... ..... ..... ..... ..... #####",
    "%": "##... ##..# ...#. ..#.. .#... #..## ...##",
    "'": "..#.. ..#.. .#... ..... ..... ..... .....",
    "*": "..... #.#.# .###. ##### .###. #.#.# .....",
    "?": ".###. #...# ....# ...#. ..#.. ..... ..#..",
}
GLYPH_W, GLYPH_H, GLYPH_ADVANCE = 5, 7, 6
# Glyph ink as (x, y) offsets, per character.
FONT = {ch: [(x, y) for y, row in enumerate(rows.split()) for x, c in enumerate(row) if c == "#"]
        for ch, rows in _GLYPH_ROWS.items()}
FONT["\u00c5"] = FONT["A"]   # Angstrom sign drawn as A
FONT["\u212b"] = FONT["A"]


def text_width(text, scale=1):
    return (len(text) * GLYPH_ADVANCE - 1) * scale if text else 0


# ----------------------------------------------------------------------------------------------
# Canvas
# ----------------------------------------------------------------------------------------------
class Canvas:
    """An RGB image in a bytearray, row-major, 3 bytes a pixel."""

    def __init__(self, width, height, color=WHITE):
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(color) * (width * height))

    def set(self, x, y, color):
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            self.pixels[i:i + 3] = bytes(color)

    def get(self, x, y):
        i = 3 * (y * self.width + x)
        return tuple(self.pixels[i:i + 3])

    def blend(self, x, y, color, alpha):
        if 0 <= x < self.width and 0 <= y < self.height:
            i = 3 * (y * self.width + x)
            p = self.pixels
            for k in range(3):
                p[i + k] = int(round(p[i + k] * (1.0 - alpha) + color[k] * alpha))

    def rect(self, x0, y0, x1, y1, color):
        """Fills the inclusive rectangle [x0, x1] x [y0, y1]."""
        for y in range(y0, y1 + 1):
            for x in range(x0, x1 + 1):
                self.set(x, y, color)

    def text(self, x, y, text, color=TEXT_COLOR, scale=1):
        """Draws text with its top-left corner at (x, y)."""
        for n, ch in enumerate(text):
            ox = x + n * GLYPH_ADVANCE * scale
            for gx, gy in FONT.get(ch, FONT["?"]):
                for sy in range(scale):
                    for sx in range(scale):
                        self.set(ox + gx * scale + sx, y + gy * scale + sy, color)

    def text_up(self, x, y, text, color=TEXT_COLOR, scale=1):
        """Draws text reading bottom to top; (x, y) is the bottom-left corner of its box."""
        for n, ch in enumerate(text):
            oy = y - n * GLYPH_ADVANCE * scale
            for gx, gy in FONT.get(ch, FONT["?"]):
                for sy in range(scale):
                    for sx in range(scale):
                        self.set(x + gy * scale + sy, oy - gx * scale - sx, color)

    def png_bytes(self):
        """The image as a PNG file: RGB, 8 bit, every scanline with filter type 0."""
        row = 3 * self.width
        raw = b"".join(b"\x00" + bytes(self.pixels[y * row:(y + 1) * row])
                       for y in range(self.height))

        def chunk(kind, data):
            return (struct.pack(">I", len(data)) + kind + data +
                    struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

        ihdr = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
                chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


# ----------------------------------------------------------------------------------------------
# Input
# ----------------------------------------------------------------------------------------------
def _number(path, line, column, text, integer=False):
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise InputError(f"{path}:{line}: column {column} is not {kind}: {text!r}") from None
    if not integer and not math.isfinite(value):
        raise InputError(f"{path}:{line}: column {column} is not a finite number: {text!r}")
    return value


def read_rows(path, header):
    """Yields (line number, fields) for each data row of a CSV file whose header must match."""
    try:
        f = open(path, newline="")
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}") from None
    with f:
        reader = csv.reader(f)
        try:
            first = next(reader, None)
            if first is None:
                raise InputError(f"{path}:1: empty file, expected header {','.join(header)}")
            if [c.strip() for c in first] != header:
                raise InputError(f"{path}:1: header is {','.join(first)!r}, "
                                 f"expected {','.join(header)!r}")
            for fields in reader:
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue  # blank line
                if len(fields) != len(header):
                    raise InputError(f"{path}:{reader.line_num}: {len(fields)} columns, "
                                     f"expected {len(header)}")
                yield reader.line_num, fields
        except (csv.Error, UnicodeDecodeError) as e:
            raise InputError(f"{path}:{reader.line_num}: unreadable CSV: {e}") from None


def read_energies(path):
    """Returns (ref, pred, n_atoms, splits): energies in eV per structure."""
    ref, pred, n_atoms, splits = array("d"), array("d"), array("d"), set()
    for line, f in read_rows(path, ENERGY_HEADER):
        _number(path, line, "graph", f[0], integer=True)
        n = _number(path, line, "n_atoms", f[2], integer=True)
        if n <= 0:
            raise InputError(f"{path}:{line}: column n_atoms must be positive: {f[2]!r}")
        splits.add(f[1].strip())
        n_atoms.append(n)
        ref.append(_number(path, line, "energy_ref_ev", f[3]))
        pred.append(_number(path, line, "energy_pred_ev", f[4]))
    return ref, pred, n_atoms, splits


def read_forces(path):
    """Returns (ref, pred): force components in eV/A, x, y, z of every atom in order."""
    ref, pred = array("d"), array("d")
    for line, f in read_rows(path, FORCE_HEADER):
        _number(path, line, "graph", f[0], integer=True)
        _number(path, line, "atom", f[1], integer=True)
        _number(path, line, "z", f[2], integer=True)
        for k in range(3):
            ref.append(_number(path, line, FORCE_HEADER[3 + k], f[3 + k]))
            pred.append(_number(path, line, FORCE_HEADER[6 + k], f[6 + k]))
    return ref, pred


# ----------------------------------------------------------------------------------------------
# Numbers
# ----------------------------------------------------------------------------------------------
def mae_rmse(ref, pred):
    n = len(ref)
    abs_sum = sq_sum = 0.0
    for r, p in zip(ref, pred):
        d = p - r
        abs_sum += abs(d)
        sq_sum += d * d
    return abs_sum / n, math.sqrt(sq_sum / n)


def axis_range(xs, ys):
    """One range for both axes covering every point, with a 5% margin."""
    lo, hi = min(min(xs), min(ys)), max(max(xs), max(ys))
    span = hi - lo
    if span <= 0.0:
        span = abs(lo) * 0.1 or 1.0
        lo, hi = lo - span / 2, hi + span / 2
    return lo - 0.05 * span, hi + 0.05 * span


def nice_ticks(lo, hi, target=5):
    """Tick values at 1, 2 or 5 times a power of ten, and their labels."""
    raw = (hi - lo) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    norm = raw / mag
    step = (1 if norm < 1.5 else 2 if norm < 3.5 else 5 if norm < 7.5 else 10) * mag
    decimals = max(0, -int(math.floor(math.log10(step) + 1e-9)))
    ticks = []
    for k in range(int(math.ceil(lo / step - 1e-9)), int(math.floor(hi / step + 1e-9)) + 1):
        v = k * step
        if abs(v) >= 1e6 or decimals > 6:
            label = f"{v:.3g}"
        else:
            label = f"{v:.{decimals}f}"
        if label.lstrip("-").strip("0.") == "":
            label = "0"
        ticks.append((v, label))
    return ticks


def fmt_metric(v):
    """A metric for a title: three significant digits, no exponent below a million."""
    if v >= 1e6:
        return f"{v:.3g}"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}" if v >= 0.001 or v == 0 else f"{v:.2e}"


# ----------------------------------------------------------------------------------------------
# Drawing
# ----------------------------------------------------------------------------------------------
def plot_box(panel):
    """(x0, y0, size) of the square plot area of panel 0, 1, ... in image pixels. The diagonal
    y = x runs through pixels (x0 + k, y0 + size - 1 - k) for k in range(size)."""
    return panel * PANEL + PLOT_LEFT, PLOT_TOP, PLOT_SIZE


def _fit_scale(text, width):
    return 2 if text_width(text, 2) <= width else 1


def draw_panel(canvas, panel, xs, ys, title, subtitle, xlabel, ylabel):
    x0, y0, size = plot_box(panel)
    px = panel * PANEL
    lo, hi = axis_range(xs, ys)
    span = hi - lo

    def to_pixel(v):
        return int(round((v - lo) / span * (size - 1)))

    ticks = nice_ticks(lo, hi)
    # grid
    for v, _ in ticks:
        t = to_pixel(v)
        for k in range(size):
            canvas.set(x0 + t, y0 + k, GRID_COLOR)
            canvas.set(x0 + k, y0 + size - 1 - t, GRID_COLOR)

    # points: count hits per pixel, then blend 1 - (1 - alpha)^count of the point colour
    n = len(xs)
    stride = max(1, -(-n // MAX_POINTS))
    drawn = -(-n // stride)
    dot, alpha = (3, 0.6) if drawn <= 2000 else (2, 0.35) if drawn <= 20000 else (1, 0.2)
    counts = array("I", bytes(4 * size * size))
    for i in range(0, n, stride):
        cx, cy = to_pixel(xs[i]), size - 1 - to_pixel(ys[i])
        for dy in range(-(dot // 2), dot - dot // 2):
            yy = cy + dy
            if 0 <= yy < size:
                base = yy * size
                for dx in range(-(dot // 2), dot - dot // 2):
                    xx = cx + dx
                    if 0 <= xx < size:
                        counts[base + xx] += 1
    for idx, c in enumerate(counts):
        if c:
            canvas.blend(x0 + idx % size, y0 + idx // size, POINT_COLOR,
                         1.0 - (1.0 - alpha) ** min(c, 1000))

    # diagonal y = x, drawn over the points
    for k in range(size):
        canvas.set(x0 + k, y0 + size - 1 - k, LINE_COLOR)

    # frame just outside the plot area, ticks and their labels
    canvas.rect(x0 - 1, y0 - 1, x0 + size, y0 - 1, BLACK)
    canvas.rect(x0 - 1, y0 + size, x0 + size, y0 + size, BLACK)
    canvas.rect(x0 - 1, y0 - 1, x0 - 1, y0 + size, BLACK)
    canvas.rect(x0 + size, y0 - 1, x0 + size, y0 + size, BLACK)
    widest = 0
    for v, label in ticks:
        t = to_pixel(v)
        canvas.rect(x0 + t, y0 + size + 1, x0 + t, y0 + size + 5, BLACK)            # x tick
        canvas.text(x0 + t - text_width(label) // 2, y0 + size + 9, label)
        canvas.rect(x0 - 6, y0 + size - 1 - t, x0 - 2, y0 + size - 1 - t, BLACK)  # y tick
        canvas.text(x0 - 9 - text_width(label), y0 + size - 1 - t - GLYPH_H // 2, label)
        widest = max(widest, text_width(label))

    # axis labels
    s = _fit_scale(xlabel, size)
    canvas.text(x0 + (size - text_width(xlabel, s)) // 2, y0 + size + 24, xlabel, scale=s)
    s = _fit_scale(ylabel, size)
    ylx = max(px + 2, x0 - 9 - widest - 6 - GLYPH_H * s)
    canvas.text_up(ylx, y0 + (size + text_width(ylabel, s)) // 2, ylabel, scale=s)

    # title lines, centred on the panel
    for row, line in ((8, title), (30, subtitle)):
        s = _fit_scale(line, PANEL - 12)
        canvas.text(px + (PANEL - text_width(line, s)) // 2, row + (2 if s == 1 else 0), line,
                    scale=s)


def write_png(canvas, out):
    """Writes the PNG to a temporary name beside `out` and renames it over `out`."""
    tmp = f"{out}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(canvas.png_bytes())
        os.replace(tmp, out)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise InputError(f"{out}: cannot write: {e.strerror}") from None


# ----------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------
def run(eval_dir, out, title):
    if not os.path.isdir(eval_dir):
        raise InputError(f"{eval_dir}: no such directory")
    e_path = os.path.join(eval_dir, "energies.csv")
    f_path = os.path.join(eval_dir, "forces.csv")
    if not os.path.isfile(e_path):
        raise InputError(f"{e_path}: no such file")
    e_ref, e_pred, n_atoms, splits = read_energies(e_path)
    f_ref, f_pred = read_forces(f_path) if os.path.exists(f_path) else (array("d"), array("d"))
    if not e_ref and not f_ref:
        raise InputError(f"{e_path}: no rows, and no forces in {f_path}")

    split = f" ({next(iter(splits))})" if len(splits) == 1 else ""
    panels, report = [], []
    if e_ref:
        ref_pa = array("d", (e / n for e, n in zip(e_ref, n_atoms)))
        pred_pa = array("d", (e / n for e, n in zip(e_pred, n_atoms)))
        mean = math.fsum(ref_pa) / len(ref_pa)
        xs = array("d", ((v - mean) * 1000.0 for v in ref_pa))
        ys = array("d", ((v - mean) * 1000.0 for v in pred_pa))
        mae, rmse = mae_rmse(xs, ys)
        n = len(xs)
        report.append(f"energy: n={n} structures  MAE={mae:.6f} meV/atom  RMSE={rmse:.6f} meV/atom")
        panels.append((xs, ys, (f"{title} - energy" if title else f"Energy/atom - mean{split}"),
                       f"MAE={fmt_metric(mae)} RMSE={fmt_metric(rmse)} meV/atom n={n}",
                       "reference (meV/atom)", "predicted (meV/atom)"))
    if f_ref:
        mae, rmse = (1000.0 * v for v in mae_rmse(f_ref, f_pred))
        n = len(f_ref)
        report.append(f"forces: n={n} components ({n // 3} atoms)  MAE={mae:.6f} meV/A  "
                      f"RMSE={rmse:.6f} meV/A")
        panels.append((f_ref, f_pred, (f"{title} - forces" if title else f"Force components{split}"),
                       f"MAE={fmt_metric(mae)} RMSE={fmt_metric(rmse)} meV/A n={n}",
                       "reference force (eV/A)", "predicted force (eV/A)"))

    canvas = Canvas(PANEL * len(panels), PANEL)
    for i, p in enumerate(panels):
        draw_panel(canvas, i, *p)
    write_png(canvas, out)
    print(f"wrote {out} ({canvas.width}x{canvas.height})")
    for line in report:
        print(line)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Parity plots of energies.csv and forces.csv written by `ddgnn evaluate`.")
    parser.add_argument("eval_dir", metavar="EVAL_DIR")
    parser.add_argument("--out", metavar="FILE.png", help="output PNG (default EVAL_DIR/parity.png)")
    parser.add_argument("--title", metavar="TEXT", help="first title line of each panel")
    args = parser.parse_args(argv)
    out = args.out or os.path.join(args.eval_dir, "parity.png")
    try:
        run(args.eval_dir, out, args.title)
    except InputError as e:
        print(f"parity_plot: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
