"""The project's own set-up: dependency floors that can be installed
together, and test skips that say which environment variable to set."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import traces_helpers
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def install_sets() -> dict[str, dict[str, Requirement]]:
    """What ``pip install sim`` and ``pip install 'sim[EXTRA]'`` ask for, per
    set: the dependencies plus the extra's requirements (``sim[x]`` expanded),
    by canonical name, a name asked for twice keeping its highest floor."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]

    def texts(extra: str) -> list[str]:
        out = []
        for text in extras[extra]:
            match = re.fullmatch(r"sim\[([\w,-]+)\]", text)
            out += [t for x in match.group(1).split(",") for t in texts(x)] if match else [text]
        return out

    sets = {"sim": list(project["dependencies"])}
    sets |= {f"sim[{x}]": [*project["dependencies"], *texts(x)] for x in extras}
    result = {}
    for label, items in sets.items():
        found: dict[str, Requirement] = {}
        for text in items:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            if name not in found or _floor0(requirement) > _floor0(found[name]):
                found[name] = requirement
        result[label] = found
    return result


def floor(requirement: Requirement) -> Version | None:
    """The lower bound a ``>=`` specifier states, or None."""
    bounds = [Version(s.version) for s in requirement.specifier if s.operator == ">="]
    return max(bounds) if bounds else None


def _floor0(requirement: Requirement) -> Version:
    return floor(requirement) or Version("0")


def test_every_dependency_states_a_floor():
    """Each requirement has a ``>=`` lower bound (what 'installable
    together' is checked on)."""
    missing = sorted({str(r) for reqs in install_sets().values() for r in reqs.values()
                      if floor(r) is None})
    assert not missing, missing


def test_dependency_floors_are_installable_together():
    """Resolved from the metadata, for ``sim`` and for each extra: for every
    requirement A of the set and every requirement A makes of another
    requirement B of the set, the set's floor of B satisfies A's specifier,
    so the floors do not promise a combination no resolver can install
    (pydantic>=2.6 beside genai-prices, which needs pydantic>=2.10, did).
    A's metadata is read from the installed A: at A's floor exactly when it is
    installed at its floor, and otherwise a newer A, which as a rule asks no
    less, so a conflict flagged here is raised by raising B's floor. Markers
    of A's requirements are evaluated for this interpreter with no extras."""
    conflicts = set()
    for label, ours in install_sets().items():
        for name, requirement in ours.items():
            try:
                requires = metadata.requires(requirement.name) or []
            except metadata.PackageNotFoundError:
                continue  # not installed here: nothing to read
            for text in requires:
                needed = Requirement(text)
                if needed.marker is not None and not needed.marker.evaluate({"extra": ""}):
                    continue
                other = canonicalize_name(needed.name)
                if other == name or other not in ours:
                    continue
                our_floor = floor(ours[other])
                if our_floor is not None and not needed.specifier.contains(our_floor,
                                                                             prereleases=True):
                    conflicts.add(f"{label}: {requirement.name} "
                                  f"{metadata.version(requirement.name)} needs {needed}; the "
                                  f"floor is {ours[other].name}>={our_floor}")
    assert not conflicts, "\n".join(sorted(conflicts))


def test_installed_versions_meet_the_floors():
    """What is installed here satisfies every declared specifier (the floors
    are not above what the tests run on)."""
    wrong = []
    for requirement in install_sets()["sim[test]"].values():
        try:
            installed = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            continue
        if not requirement.specifier.contains(installed, prereleases=True):
            wrong.append(f"{requirement}: installed {installed}")
    assert not wrong, wrong


def test_a_skip_for_missing_trace_data_names_the_variables(tmp_path, monkeypatch):
    """Without the shared data the trace tests skip saying to set
    SIM_TRACES_DATA or SIM_SHARED, and SIM_SHARED is honoured."""
    monkeypatch.setenv("SIM_TRACES_DATA", str(tmp_path / "absent"))
    with pytest.raises(pytest.skip.Exception) as skipped:
        traces_helpers.data_folder("tau2")
    assert re.search(r"SIM_TRACES_DATA.*SIM_SHARED", str(skipped.value))
    monkeypatch.delenv("SIM_TRACES_DATA")
    (tmp_path / "data" / "traces").mkdir(parents=True)
    monkeypatch.setenv("SIM_SHARED", str(tmp_path))
    assert traces_helpers.data_folder("tau2") == tmp_path / "data" / "traces" / "tau2"
