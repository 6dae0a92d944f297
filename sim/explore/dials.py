"""The explorer's dials as Jupyter widgets (ipywidgets, the ``notebooks``
extra): sliders for the token budget, step cap, detector threshold and nudges,
toggles for the verifier and the detector, a full-size button, and one output area that every change
redraws (the outcome shares, the cost tail and the frontier, with a table).

Sliders report on release (``continuous_update=False``), so a drag costs one
simulation. Each redraw replaces the output area's contents in one update,
and the status line says what was simulated and how long the redraw took.
Errors (an invalid setting) are shown in the status line, never lost in a
callback. Without a widget front end (nbclient, a code host) the panel still
builds and draws; :meth:`Panel.snapshot` shows the current figures as plain
cell outputs.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import ipywidgets as widgets
from IPython.core.formatters import DisplayFormatter
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import display
from matplotlib.figure import Figure
from traitlets import TraitError

from sim.bad_input import InputError
from sim.explore.explorer import Explorer, Setting, View, choices, tokens_label

STYLE = {"description_width": "130px"}


def _wide() -> widgets.Layout:
    return widgets.Layout(width="420px")


def _options(values: tuple[int | None, ...], label) -> list[tuple[str, int | None]]:
    return [(label(v), v) for v in values]


def _values(control: widgets.ValueWidget) -> str:
    if hasattr(control, "options"):
        return ", ".join(repr(v) for _, v in control.options)
    return f"{control.min} to {control.max}"


def _text(data: dict[str, Any]) -> dict[str, Any]:
    """Binary display data (a PNG) as base64 text, as the notebook format and
    display messages carry it: bytes in a widget's state would travel as a
    binary buffer, which a front end's output area cannot render."""
    return {k: base64.b64encode(v).decode("ascii") if isinstance(v, bytes | bytearray) else v
            for k, v in data.items()}


def _steps_label(steps: int | None) -> str:
    return "none" if steps is None else str(steps)


class Panel(widgets.VBox):
    """The dials, a status line and the figures of :class:`Explorer`
    ``explorer``. ``controls`` maps dial names (the fields of
    :class:`~sim.explore.explorer.Setting`) to their widgets; ``output`` is
    the area the figures are drawn in; ``seconds`` the last redraw's time
    (simulation and drawing)."""

    def __init__(self, explorer: Explorer) -> None:
        self.explorer = explorer
        s = explorer.setting
        self.controls: dict[str, widgets.ValueWidget] = {
            "tokens": widgets.SelectionSlider(
                options=_options(choices(explorer.token_choices, s.tokens), tokens_label),
                value=s.tokens,
                description="token budget", continuous_update=False, layout=_wide(),
                style=STYLE, tooltip="prompt tokens over the whole run"),
            "steps": widgets.SelectionSlider(
                options=_options(choices(explorer.step_choices, s.steps), _steps_label),
                value=s.steps,
                description="step cap", continuous_update=False, layout=_wide(), style=STYLE),
            "repeat_threshold": widgets.IntSlider(
                value=s.repeat_threshold, min=2, max=max(8, s.repeat_threshold),
                description="repeats = a loop", continuous_update=False, layout=_wide(),
                style=STYLE),
            "nudges": widgets.IntSlider(
                value=s.nudges, min=0, max=max(4, s.nudges), description="nudges, then stop",
                continuous_update=False, layout=_wide(), style=STYLE),
            "verifier": widgets.ToggleButtons(
                options=[("on", True), ("off", False)], value=s.verifier,
                description="verifier", style={**STYLE, "button_width": "80px"}),
            "detector": widgets.ToggleButtons(
                options=[("on", True), ("off", False)], value=s.detector,
                description="detector", style={**STYLE, "button_width": "80px"}),
        }
        self.full = widgets.Button(
            description=f"Full size: {explorer.full_tasks:,} tasks per cell",
            button_style="primary", layout=widgets.Layout(width="280px"),
            tooltip="run the current setting, the reference and the ladder at full size")
        self.reset = widgets.Button(description=f"Back to {explorer.name} as written",
                                    layout=widgets.Layout(width="280px"))
        self.status = widgets.HTML()
        self.output = widgets.Output()
        self.seconds = 0.0
        self.view: View | None = None
        self.figures: dict[str, Figure] = {}
        self._paused = False
        for control in self.controls.values():
            control.observe(self._changed, names="value")
        for name in ("repeat_threshold", "nudges"):  # no detector, nothing to set
            self.controls[name].disabled = not s.detector
        self.full.on_click(lambda _: self._safely(lambda: self.redraw(full=True)))
        self.reset.on_click(lambda _: self._safely(lambda: self.set(**vars(explorer.reference))))
        dials = widgets.VBox(list(self.controls.values()))
        buttons = widgets.VBox([self.full, self.reset], layout=widgets.Layout(
            justify_content="center", margin="0 0 0 24px"))
        super().__init__([widgets.HBox([dials, buttons]), self.status, self.output])
        self.redraw()

    def __repr__(self) -> str:  # what a reader without a widget front end sees
        return f"{self.explorer.name} dials (live in Jupyter): {self.explorer.setting.label()}"

    def setting(self) -> Setting:
        """The setting the dials show."""
        return Setting(**{name: c.value for name, c in self.controls.items()})

    def set(self, **dials: Any) -> None:
        """Move several dials (``tokens=500_000, nudges=2``), then redraw once."""
        unknown = sorted(set(dials) - set(self.controls))
        if unknown:
            raise InputError(f"no dial named {', '.join(unknown)}; the dials are "
                             f"{', '.join(self.controls)}")
        self._paused = True
        try:
            for name, value in dials.items():
                try:
                    self.controls[name].value = value
                except TraitError:
                    raise InputError(f"{name}={value!r} is not a value of its dial "
                                     f"({_values(self.controls[name])})") from None
        finally:
            self._paused = False
        self.redraw()

    def _changed(self, _change: dict) -> None:
        detector = self.controls["detector"].value
        self.controls["repeat_threshold"].disabled = not detector
        self.controls["nudges"].disabled = not detector
        if not self._paused:
            self._safely(self.redraw)

    def _safely(self, action) -> None:
        # a widget callback's exception would only reach the front end's log
        try:
            action()
        except Exception as error:
            self.status.value = (f"<span style='color:#c8433a'>redraw failed: "
                                 f"{type(error).__name__}: {error}</span>")

    def redraw(self, *, full: bool = False) -> View | None:
        """Simulate the dials' setting (small sample, or ``full`` size) and
        replace the output area's figures; returns the view (None on an error,
        which the status line then shows)."""
        start = time.perf_counter()
        explorer = self.explorer
        explorer.setting = self.setting()
        if full:
            self.status.value = (f"<b>running {explorer.full_tasks:,} tasks per cell</b> "
                                 "(the figures update when it is done)")
        try:
            view = explorer.view(full=full)
            figs = explorer.draw(view)
        except InputError as error:
            self.status.value = f"<span style='color:#c8433a'>cannot simulate: {error}</span>"
            return None
        shell = InteractiveShell.initialized() and InteractiveShell.instance()
        formatter = shell.display_formatter if shell else DisplayFormatter()
        assert formatter is not None  # an initialised shell has its formatter
        fmt = formatter.format
        outputs = []
        for item in (view.table(), *figs.values()):
            data, metadata = fmt(item)
            outputs.append({"output_type": "display_data", "data": _text(data),
                            "metadata": metadata})
        self.output.outputs = tuple(outputs)
        self.view, self.figures = view, figs
        self.seconds = time.perf_counter() - start
        self.status.value = (f"{explorer.status(view)}; redrawn in {self.seconds:.2f} s"
                             + (" (full size)" if full else ""))
        return view

    def snapshot(self) -> None:
        """Display the status, table and figures of the last redraw as plain
        outputs of the running cell (they stay in the saved notebook)."""
        if self.view is None:
            return
        print(f"{self.view.setting.label()}: {self.explorer.status(self.view)}; "
              f"redrawn in {self.seconds:.2f} s")
        display(self.view.table(), *self.figures.values())


def panel(explorer: Explorer, **dials: Any) -> Panel:
    """The widget panel of ``explorer``, drawn for its current setting with
    ``dials`` (e.g. ``tokens=500_000``) applied."""
    explorer.setting = explorer.setting.replace(**dials)
    return Panel(explorer)
