"""Figure plumbing: Figures on their own Agg canvas (never ``pyplot``),
plain text only (no mathtext), PNG bytes that are the same for the same
figure, and figure builders that never raise (a figure that cannot be drawn
says why). Sizes are in inches, resolution in dots per inch.
"""

from __future__ import annotations

import contextlib
import functools
import io
import warnings
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

P = ParamSpec("P")

WIDTH_IN = 8.0
DPI = 100


def agg_figure(figsize: tuple[float, float]) -> Figure:
    """A Figure (``figsize`` in inches) on its own Agg canvas, which Jupyter displays
    as a PNG without pyplot."""
    fig = Figure(figsize=figsize, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    fig._repr_png_ = lambda: png_bytes(fig)  # type: ignore[attr-defined]  # IPython's hook
    return fig


def new_figure(height_in: float, ncols: int = 1) -> tuple[Figure, list]:
    """A Figure on its own Agg canvas with ``ncols`` axes side by side."""
    fig = agg_figure(figsize=(WIDTH_IN, height_in))
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def png_bytes(fig: Figure, dpi: int = DPI) -> bytes:
    """The figure as PNG bytes, without the software-version metadata (so the
    same figure gives the same bytes across matplotlib versions' metadata).

    Every text is drawn as plain text: a ``$`` in a scenario name, cell name
    or sweep value is a dollar sign, never the start of mathtext (which fails
    on ``a $x^$``). A figure that cannot be drawn all the same gives a figure
    saying so, with the error: a report never costs the results. Drawing
    warnings are not printed: the figure is drawn all the same."""
    try:
        return _png(fig, dpi)
    except Exception as error:
        return _png(_failed_figure(error), dpi)


def _png(fig: Figure, dpi: int) -> bytes:
    buffer = io.BytesIO()
    # matplotlib's drawing warnings (a glyph the font lacks, as a NUL or CJK
    # name; a layout that cannot fit 1,000 cells) are about the picture, which
    # still draws: stderr stays for progress and errors
    with plain_text(fig), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    return buffer.getvalue()


_PLAIN: dict[Any, Any] = {"text.parse_math": False, "text.usetex": False}


@contextlib.contextmanager
def plain_text(fig: Figure) -> Iterator[None]:
    """Every text of ``fig``, and those made while it draws (tick labels),
    as plain text while the block runs (rcParams restored after it)."""
    for text in fig.findobj(Text):
        text.set_parse_math(False)
        text.set_usetex(False)
    with rc_context(_PLAIN):
        yield


def never_fails(build: Callable[P, Figure]) -> Callable[P, Figure]:
    """``build``, returning a figure that says why when it cannot draw one."""
    @functools.wraps(build)
    def safe(*args: P.args, **kwargs: P.kwargs) -> Figure:
        try:
            with rc_context(_PLAIN):
                return build(*args, **kwargs)
        except Exception as error:
            return _failed_figure(error)
    return safe


def _failed_figure(error: Exception) -> Figure:
    """A small figure saying that a figure could not be drawn, and why."""
    fig = agg_figure(figsize=(WIDTH_IN, 1.2))
    reason = f"{type(error).__name__}: {error}".splitlines()[0][:150]
    fig.text(0.5, 0.5, f"this figure could not be drawn ({reason})", ha="center",
             va="center", wrap=True, parse_math=False)
    return fig
