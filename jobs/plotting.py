"""What the figure scripts of jobs/ share: strict CSV reading with one-line errors that name the
file, line and column, matplotlib (Debian's python3-matplotlib) without a display, and PNGs
written under a temporary name and renamed into place, so that a failed plot leaves no file."""

import csv
import math
import os
import sys


class InputError(Exception):
    """Bad input: the message names the file (and line); the scripts print it and exit 1."""


def number(path, line, column, text, integer=False):
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


def pyplot():
    """matplotlib.pyplot on the Agg backend. When this interpreter lacks matplotlib (a pyenv or
    venv python3 first on PATH) the script is run again by Debian's /usr/bin/python3, which has
    it with python3-matplotlib installed."""
    try:
        import matplotlib
    except ImportError:
        system = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(system) and os.path.exists(system):
            os.execv(system, [system] + sys.argv)
        sys.exit(f"{os.path.basename(sys.argv[0])}: matplotlib is missing: install Debian's "
                 "python3-matplotlib (bash jobs/install_deps.sh)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def write_png(fig, out, dpi=100):
    """save_png, then closes the figure and says what was written, with its size in pixels."""
    save_png(fig, out, dpi=dpi)
    width, height = fig.canvas.get_width_height()
    pyplot().close(fig)
    print(f"wrote {out} ({width}x{height})")


def save_png(fig, out, dpi=100):
    """Writes the figure to `out` through a temporary file (nothing half-written is left)."""
    tmp = f"{out}.tmp.{os.getpid()}.png"
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
