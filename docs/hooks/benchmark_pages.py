"""MkDocs hook: the benchmark pages' method and latest figures, from the benchmarks themselves.

- `<!-- generated: benchmark-method search -->` becomes the module docstring of
  `benchmarks/search.py`: how the benchmark works, as its code documents it.
- `<!-- generated: benchmark-results search -->` becomes the tables (and plots) of
  `docs/benchmarks/results/search.json`, the results file the benchmark's last full run wrote
  (`benchmarks/results.py`), or a note that there is none yet.
- `<!-- figure: search api_peak_rss_mb_1m {:,.0f} -->` on any page becomes one figure of a
  results file, formatted (a missing file or key fails the build).

Every page is also checked for figures typed by hand: a number with a unit (`ms`, `s`, `MB`,
`GB`, `rps`, `q/s`, `chunks/s`, `documents/s`, `%`) that equals a figure of a results file, as
rounded on the page, fails the build (`Past runs` keeps earlier runs' figures by design).
"""

from __future__ import annotations

import ast
import logging
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("mkdocs.plugins.benchmark_pages")

MARKER = re.compile(r"<!-- generated: benchmark-(?P<what>method|results) (?P<name>[\w-]+) -->")
FIGURE = re.compile(r"<!-- figure: (?P<name>[\w-]+) (?P<key>[\w.-]+) (?P<format>\{[^}]*\}) -->")
RESULTS = "benchmarks/results"  # under the docs directory
# Pages whose figures are from earlier runs on purpose.
HISTORY_PAGES = ("benchmarks/past-runs.md",)
# A number with a unit, as a page types a measured figure.
TYPED_FIGURE = re.compile(
    r"(?<![\w.,])(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)\s?"
    r"(?P<unit>ms|s|MB|GB|rps|q/s|chunks/s|documents/s|%)(?![\w/])"
)
CODE = re.compile(r"```.*?```|`[^`\n]*`|<!--.*?-->", re.S)


def method(module: str, repo: Path = REPO) -> str:
    """A benchmark module's docstring, as Markdown."""
    path = repo / "benchmarks" / f"{module}.py"
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not docstring:
        raise ValueError(f"{path} has no docstring")
    return docstring.strip() + "\n"


def results(name: str, directory: Path, link_prefix: str) -> str:
    """The latest figures of a benchmark from its results file, or a note that it has none."""
    if str(REPO) not in sys.path:  # the benchmarks are no installed package
        sys.path.insert(0, str(REPO))
    from benchmarks.results import load, render_markdown

    record = load(name, directory)
    if record is None:
        return (
            f"No results file yet: a full run of the benchmark writes `docs/{RESULTS}/{name}.json` "
            "(see [Benchmarks](index.md#results-files)). Figures of earlier runs are in "
            "[Past runs](past-runs.md).\n"
        )
    return render_markdown(record, link_prefix=link_prefix)


def figure(name: str, key: str, directory: Path) -> Any:
    """One figure of a results file (`key` may reach into nested objects with dots)."""
    record = _record(name, directory)
    value: Any = record["figures"]
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(f"docs/{RESULTS}/{name}.json has no figure {key!r}")
        value = value[part]
    return value


def _record(name: str, directory: Path) -> dict[str, Any]:
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from benchmarks.results import load

    record = load(name, directory)
    if record is None:
        raise FileNotFoundError(f"docs/{RESULTS}/{name}.json does not exist")
    return record


def published_figures(directory: Path) -> list[tuple[str, str, float]]:
    """Every number of every results file's figures: (file, key, value)."""
    found: list[tuple[str, str, float]] = []

    def walk(name: str, key: str, value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            found.append((name, key, float(value)))
        elif isinstance(value, dict):
            for inner, item in value.items():
                walk(name, f"{key}.{inner}" if key else str(inner), item)

    for path in sorted(directory.glob("*.json")):
        walk(path.stem, "", _record(path.stem, directory)["figures"])
    return found


def unit_of(key: str) -> str | None:
    """The unit a results file's figure is in, from its key's name."""
    words = re.split(r"[._ ]", key.lower())
    if any(w.startswith("rps") for w in words):
        return "rps"
    if "ms" in words or any(w.startswith("steps") for w in words):
        return "ms"
    if "mb" in words or "rss" in words:
        return "MB"
    if "s" in words:
        return "s"
    return None


def setting_defaults() -> set[float]:
    """Every number among the settings' defaults (a page may name them freely)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from infra.settings import Settings

    numbers: set[float] = set()

    def walk(value: Any) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            numbers.add(float(value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(Settings.model_construct().model_dump())
    return numbers


def typed_figures(
    markdown: str, published: list[tuple[str, str, float]], defaults: set[float]
) -> list[str]:
    """The figures a page types by hand that a results file holds: a number of three digits or
    more with a unit, equal to a published figure in that unit (`GB` for one in MB) rounded as
    the page rounds it, and neither a round ten nor a setting's default."""
    problems = []
    for match in TYPED_FIGURE.finditer(CODE.sub(" ", markdown)):
        text = match["number"].replace(",", "")
        decimals = len(text.partition(".")[2])
        number = float(text)
        if len(text.replace(".", "").lstrip("0")) < 3 or number in defaults:
            continue  # too few digits to tell a figure from chance, or a setting's default
        if decimals == 0 and number % 10 == 0:
            continue
        unit = match["unit"]
        for name, key, value in published:
            key_unit = unit_of(key)
            candidates: tuple[float, ...]
            if unit == "GB" and key_unit == "MB":
                candidates = (value / 1000, value / 1024)
            elif unit == key_unit:
                candidates = (value,)
            else:
                continue
            if any(c and round(c, decimals) == number for c in candidates):
                problems.append(
                    f"{match.group(0)!r} is {name}.json's {key}: write "
                    f"<!-- figure: {name} {key} {{:,.{decimals}f}} --> instead"
                )
                break
    return problems


# -- MkDocs events --------------------------------------------------------------------------------


# What every page is checked against, read once per build (`on_pre_build`).
_published: list[tuple[str, str, float]] = []
_defaults: set[float] = set()


def on_pre_build(config: Any) -> None:
    """Reads the results files' figures and the settings' defaults once for the build."""
    global _published, _defaults
    _published = published_figures(Path(config["docs_dir"]) / RESULTS)
    _defaults = setting_defaults()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the markers of a page, and checks it for figures typed by hand."""
    directory = Path(config["docs_dir"]) / RESULTS
    if page.file.src_uri not in HISTORY_PAGES:
        for problem in typed_figures(markdown, _published, _defaults):
            log.warning("%s: %s", page.file.src_uri, problem)
    markdown = FIGURE.sub(
        lambda m: m["format"].format(figure(m["name"], m["key"], directory)), markdown
    )
    if "<!-- generated: benchmark-" not in markdown:
        return markdown
    page_dir = posixpath.dirname(page.file.src_uri)
    prefix = posixpath.relpath(RESULTS, page_dir or ".") + "/"

    def fill(match: re.Match[str]) -> str:
        if match["what"] == "method":
            return method(match["name"])
        return results(match["name"], directory, prefix)

    return MARKER.sub(fill, markdown)
