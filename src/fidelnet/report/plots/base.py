"""What every plot shares: the figure, literal text, legends, saving."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogFormatter

__all__ = [
    "DPI",
    "SERIES",
    "SIZE",
    "SMALL",
    "color_of",
    "figure",
    "legend",
    "no_data",
    "plain_numbers",
    "save",
    "series_lines",
    "text",
]

SIZE = (8.0, 4.5)
SMALL = (6.0, 3.6)
"""The size of plots shown two abreast (comparisons): text stays readable."""
DPI = 100
SERIES = "series"
"""The ``gid`` of data lines (reference lines carry their own)."""


def figure(rows: int = 1, *, small: bool = False) -> tuple[Figure, list[Axes]]:
    width, height = SMALL if small else SIZE
    fig = Figure(figsize=(width, height * (1 if rows == 1 else 0.75 * rows)), dpi=DPI)
    FigureCanvasAgg(fig)
    fig.set_layout_engine("constrained")
    axes = [fig.add_subplot(rows, 1, i + 1) for i in range(rows)]
    return fig, axes


def color_of(colors: Sequence[str | None] | None, i: int) -> str | None:
    """The colour asked for the ``i``-th result (None: matplotlib's next one)."""
    return colors[i] if colors is not None and i < len(colors) else None


def text(s: str) -> str:
    """``s`` as matplotlib shows it literally: ``$`` would start mathtext, a leading
    ``_`` would hide the label from the legend."""
    s = s.replace("$", r"\$")
    return " " + s if s.startswith("_") else s


def no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes)


def legend(ax: Axes, *, small: bool = False) -> None:
    handles, _labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize="x-small" if small else "small", loc="best")


def plain_numbers(ax: Axes) -> None:
    """Log y axis labelled ``10``, ``200``, ``5000`` rather than powers of ten."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2.0, 0.5)))


def save(fig: Figure, out: str | os.PathLike[str], *, svg: bool = False) -> Path:
    """Write ``fig`` to ``out`` as PNG (and SVG beside it); returns ``out``."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # A label in a script the bundled font lacks is drawn as boxes, not an error.
        warnings.filterwarnings("ignore", message=r"Glyph .* missing", category=UserWarning)
        fig.savefig(path, format="png", dpi=DPI)
        if svg:
            fig.savefig(path.with_suffix(".svg"), format="svg")
    return path


def series_lines(fig: Figure) -> list[Line2D]:
    """The data lines of ``fig``'s first axes (``gid="series"``)."""
    return [line for line in fig.axes[0].get_lines() if line.get_gid() == SERIES]
