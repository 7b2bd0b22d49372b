"""MkDocs hook: the benchmark pages' method and latest figures, from the benchmarks themselves.

- `<!-- generated: benchmark-method search -->` becomes the module docstring of
  `benchmarks/search.py`: how the benchmark works, as its code documents it.
- `<!-- generated: benchmark-results search -->` becomes the tables (and plots) of
  `docs/benchmarks/results/search.json`, the results file the benchmark's last full run wrote
  (`benchmarks/results.py`), or a note that there is none yet.
- `<!-- figure: search api_peak_rss_mb_1m {:,.0f} -->` on any page becomes one figure of a
  results file, formatted (a missing file or key fails the build).

Every page is checked for figures typed by hand: a number with a unit (`ms`, `s`, `MB`, `GB`,
`rps`, `q/s`, `chunks/s`, `documents/s`, `%`) that equals a figure of a results file, as rounded
on the page, fails the build (`typed_figures`).

The pages that state measured or configured figures (`sourced_page`: the concept pages,
`production.md`, `operations.md` and the benchmark pages but `Past runs`, which keeps earlier
runs' figures by design) are held further (`unsourced_figures`): there, EVERY number with a unit
must come from a source, or the build fails. The rule:

- A number with a unit is digits (`1,200`, `0.5`, an optional `k` for thousands: `12k rps`)
  right before a unit (`UNITS`), after at most one space or a hyphen (`10-second`): time
  (`µs`, `ms`, `s`, `min`, `h`, `day`, and `milliseconds`, `seconds`, `minutes`, `hours`, `days`
  ...), sizes (`KB`, `MB`, `GB`, their `KiB` forms and `kilobytes` ...), rates (`rps`, `qps`,
  `q/s`, any `<word>/s` or `<word> per second` such as `chunks/s`, `documents per second`, and
  `<word>/min`, `<word> per minute`) and shares (`%`, `percent`). A series before one unit
  counts every number of it: `63/11.5/4 ms`, `10-20 s`, `2 to 5 minutes`, `1, 2 or 5 s`.
- Sourced, so allowed: a `<!-- figure: ... -->` marker (its output is put in after the check);
  any number in a code span or block, an HTML comment, a link's target or an attribute list;
  a version (`v1.2`, `1.2.3`: a number right after a letter, dot or comma is no figure), and a
  setting's default.
- A setting's default: a numeric field of `Settings` or of a model nested in it (walked as the
  settings reference walks them) whose name says its unit: `_ms`, `_s`, `_bytes`, `_kb`, `_mb`,
  `_gb`, `_per_second`, `_rps`, `_per_minute`, `_pct` (a field without one, a count or a
  weight, vouches for no figure with a unit). The page's number, in the page's unit, must equal
  the default converted to that unit and rounded to as many decimals as the page writes:
  `stall_after_s=600` is "600 s", "10 minutes", "10 min" or "600,000 ms"; `max_upload_mb=20`
  is "20 MB"; `kafka.max_message_bytes=2097152` is "2 MB" (KB, MB and GB are read both as
  powers of 1000 and of 1024); `search.embedding_ttl_s=86400` is "24 h" or "1 day". And the
  same block (paragraph, list item, table row or heading: `blocks`) must name the setting, by
  its path (`ingest.stall_after_s`), its own name (`stall_after_s`) or its variable
  (`RAGLINE_INGEST__STALL_AFTER_S`), in code or not: a measured "about 15 s" is no default
  because some setting happens to be 15 s.
- Headings, tables, lists and admonitions are prose like any other: they are checked.
- The opt-out, for a fixed fact that is neither measured nor configured (a protocol constant, a
  third party's limit): `<!-- fixed: why -->` on the source line of the number (`grep -rn
  '<!-- fixed:' docs` lists them all). Every number on that line then passes; keep them rare.
  Numbers written as words ("fifteen seconds") are not read.

Both checks log an error per figure, naming the page, line and what would source it (a
results file's marker when one holds the figure); `mkdocs build --strict` then fails, even
with `--quiet`, which drops warnings before `--strict` counts them.
"""

from __future__ import annotations

import ast
import logging
import posixpath
import re
import sys
from dataclasses import dataclass
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
# The pages where every number with a unit needs a source (`unsourced_figures`).
SOURCED_DIRECTORIES = ("concepts/", "benchmarks/")
SOURCED_FILES = ("production.md", "operations.md")
# The opt-out of a line: a fixed fact, neither measured nor configured.
FIXED = re.compile(r"<!-- fixed: *\S[^>]*-->")
# What is no prose: code, comments (the markers among them), link targets, attribute lists, URLs.
NOT_PROSE = re.compile(
    r"```.*?```|~~~.*?~~~|``[^\n]*?``|`[^`\n]*`"  # code blocks and spans
    r"|<!--.*?-->|<[a-zA-Z/][^>\n]*>"  # comments (markers, opt-outs) and HTML tags
    r"|\]\([^)\n]*\)|\{[#.:][^}\n]*\}|https?://\S+",  # link targets, attribute lists, URLs
    re.S,
)


@dataclass(frozen=True)
class Unit:
    """A unit a page may write a figure in: its dimension and how many of the dimension's base
    unit (s, byte, per second, fraction) one of it is (two for a size: 1000ⁿ and 1024ⁿ)."""

    pattern: str
    dimension: str
    factors: tuple[float, ...]


_PER = r"[A-Za-z]+(?:/{short}| per {long})"
UNITS = (
    Unit(r"µs|microseconds?", "time", (1e-6,)),
    Unit(r"ms|msecs?|milliseconds?", "time", (1e-3,)),
    Unit(r"s|secs?|seconds?", "time", (1.0,)),
    Unit(r"min|mins|minutes?", "time", (60.0,)),
    Unit(r"h|hrs?|hours?", "time", (3600.0,)),
    Unit(r"days?", "time", (86400.0,)),
    Unit(r"rps|qps|q/s|" + _PER.format(short="s", long="second"), "rate", (1.0,)),
    Unit(_PER.format(short="min", long="minute"), "rate", (1 / 60,)),
    Unit(r"KB|kB|KiB|kilobytes?", "size", (1e3, 2.0**10)),
    Unit(r"MB|MiB|megabytes?", "size", (1e6, 2.0**20)),
    Unit(r"GB|GiB|gigabytes?", "size", (1e9, 2.0**30)),
    Unit(r"TB|TiB|terabytes?", "size", (1e12, 2.0**40)),
    Unit(r"%|percent|per cent", "share", (0.01,)),
)
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_SEPARATOR = r"[ \t]?[/\u2013\u2014-][ \t]?|,[ \t]|\s(?:to|or|and)\s"
# A number, or a series of them, with a unit: any figure a page may state.
FIGURE_WITH_UNIT = re.compile(
    rf"(?<![\w.,])(?P<numbers>(?:{_NUMBER})k?(?:(?:{_SEPARATOR})(?:{_NUMBER})k?)*)"
    rf"(?:\s|-)?(?P<unit>{'|'.join(unit.pattern for unit in UNITS)})(?![\w/])"
)
SERIES_NUMBER = re.compile(rf"(?<![\w.,])(?P<number>{_NUMBER})(?P<k>k?)(?![\d])")


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


@dataclass(frozen=True)
class SettingDefault:
    """A setting whose default a page may state: its path, its unit's dimension and its
    default in the dimension's base unit (two for one in MB: as 1000² and 1024² bytes)."""

    path: str
    dimension: str
    values: tuple[float, ...]

    def named_in(self, text: str) -> bool:
        """Whether a text names the setting: its path (`ingest.stall_after_s`), its own name
        (`stall_after_s`) or its variable (`RAGLINE_INGEST__STALL_AFTER_S`)."""
        variable = "RAGLINE_" + self.path.upper().replace(".", "__")
        names = (self.path, self.path.rsplit(".", 1)[-1], variable)
        return any(re.search(rf"(?<![\w]){re.escape(name)}(?!\w)", text) for name in names)


# A setting's unit, from the end of its name: the dimension and the base units one is.
SETTING_UNITS = (
    ("_ms", "time", (1e-3,)),
    ("_s", "time", (1.0,)),
    ("_bytes", "size", (1.0,)),
    ("_kb", "size", (1e3, 2.0**10)),
    ("_mb", "size", (1e6, 2.0**20)),
    ("_gb", "size", (1e9, 2.0**30)),
    ("_per_second", "rate", (1.0,)),
    ("_rps", "rate", (1.0,)),
    ("_per_minute", "rate", (1 / 60,)),
    ("_pct", "share", (0.01,)),
)


def setting_default_figures() -> list[SettingDefault]:
    """Every numeric default of the settings (`Settings` and the models nested in it) whose
    field's name says its unit."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from pydantic import BaseModel

    from infra.settings import Settings

    found: list[SettingDefault] = []

    def walk(instance: BaseModel, path: str) -> None:
        for name in type(instance).model_fields:
            value = getattr(instance, name)
            if isinstance(value, BaseModel):
                walk(value, f"{path}{name}.")
            elif isinstance(value, int | float) and not isinstance(value, bool):
                for suffix, dimension, factors in SETTING_UNITS:
                    if name.endswith(suffix):
                        values = tuple(float(value) * f for f in factors)
                        found.append(SettingDefault(path + name, dimension, values))
                        break

    walk(Settings.model_construct(), "")
    return found


@dataclass(frozen=True)
class TypedFigure:
    """A number with a unit a page states: where, as written, and as read."""

    line: int  # 1-based, in the page's source
    text: str  # the whole match: "63/11.5/4 ms"
    number: str  # this number: "11.5"
    unit: Unit
    value: float  # the number with its `k`
    decimals: int


def figures_with_units(markdown: str) -> list[TypedFigure]:
    """Every number with a unit in a page's prose (not in code, comments, link targets,
    attribute lists or URLs), one per number of a series."""
    prose = NOT_PROSE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), markdown)
    found: list[TypedFigure] = []
    for match in FIGURE_WITH_UNIT.finditer(prose):
        unit = next(u for u in UNITS if re.fullmatch(u.pattern, match["unit"]))
        for number in SERIES_NUMBER.finditer(match["numbers"]):
            text = number["number"].replace(",", "")
            found.append(
                TypedFigure(
                    line=prose.count("\n", 0, match.start("numbers") + number.start()) + 1,
                    text=" ".join(match.group(0).split()),
                    number=number["number"] + number["k"],
                    unit=unit,
                    value=float(text) * (1000 if number["k"] else 1),
                    decimals=len(text.partition(".")[2]),
                )
            )
    return found


# A line that starts a block of its own: a heading, a list item, a table row, an admonition.
BLOCK_START = re.compile(r"[ \t]*(?:#|[-*+][ \t]|\d+[.)][ \t]|\||!!!|\?\?\?)")


def blocks(markdown: str) -> dict[int, str]:
    """Each line (1-based) and the text of its block: the paragraph, list item, table row or
    heading it is part of (a block ends at a blank line or where another starts)."""
    lines = markdown.splitlines()
    found: dict[int, str] = {}
    start = 0
    for number in range(len(lines) + 1):
        if (
            number == len(lines)
            or not lines[number].strip()
            or (number > start and BLOCK_START.match(lines[number]))
        ):
            text = "\n".join(lines[start:number])
            for inner in range(start, number):
                found[inner + 1] = text
            start = number + 1 if number < len(lines) and not lines[number].strip() else number
    return found


def _matches(figure: TypedFigure, values: tuple[float, ...]) -> bool:
    """Whether a value in the figure's dimension's base unit is the figure, in the page's unit
    and rounded as the page rounds it."""
    scale = 1000 if figure.number.endswith("k") else 1
    written = figure.value / scale
    for value in values:
        for factor in figure.unit.factors:
            shown = round(value / factor / scale, figure.decimals)
            if shown == written and (shown != 0 or value == 0):
                return True
    return False


def published_dimension(key: str) -> tuple[str, tuple[float, ...]] | None:
    """The dimension of a results file's figure and its base units, from its key's words (for
    the suggestion of a marker only)."""
    words = re.split(r"[._ :-]", key.lower())
    if key.rsplit(".", 1)[-1] in ("p_value", "questions", "wins", "losses", "ties"):
        return None
    if "pct" in words:
        return "share", (0.01,)
    if "per" in words or any(
        w.startswith(("rps", "qps")) or w.endswith(("rps", "qps")) for w in words
    ):
        return "rate", (1.0,)
    if "ms" in words or any(w.startswith("steps") for w in words):
        return "time", (1e-3,)
    if "mb" in words or "rss" in words:
        return "size", (1e6, 2.0**20)
    if "s" in words or "seconds" in words:
        return "time", (1.0,)
    if "minutes" in words:
        return "time", (60.0,)
    share = ("recall", "mrr", "ndcg", "ratio", "availability", "difference")
    if any(w.startswith(share) for w in words):
        return "share", (1.0,)
    return None


def _marker_for(figure: TypedFigure, published: list[tuple[str, str, float]]) -> list[str]:
    markers = []
    for name, key, value in published:
        dimension = published_dimension(key)
        if dimension is None or dimension[0] != figure.unit.dimension:
            continue
        if _matches(figure, tuple(value * f for f in dimension[1])):
            fmt = f"{{:,.{figure.decimals}f}}"
            if dimension[1] == (1.0,) and figure.unit.dimension == "share":
                fmt = f"{{:.{figure.decimals}%}}"
            markers.append(f"<!-- figure: {name} {key} {fmt} -->")
    return markers


def unsourced_figures(
    markdown: str,
    defaults: list[SettingDefault],
    published: list[tuple[str, str, float]] | None = None,
) -> list[str]:
    """The numbers with a unit a page types with no source: neither in a marker, nor in code,
    nor a setting's default, nor on a line marked `<!-- fixed: why -->` (see the module's
    docstring). Each problem names the line, the figure, and what would hold it if anything
    does (a results file's figure, as a marker)."""
    fixed = {n for n, line in enumerate(markdown.splitlines(), 1) if FIXED.search(line)}
    block_of = blocks(markdown)
    problems = []
    for figure in figures_with_units(markdown):
        if figure.line in fixed:
            continue
        same = [
            d
            for d in defaults
            if d.dimension == figure.unit.dimension and _matches(figure, d.values)
        ]
        if any(d.named_in(block_of.get(figure.line, "")) for d in same):
            continue
        markers = _marker_for(figure, published or [])
        if same:
            settings = ", ".join(f"`{d.path}`" for d in same)
            hint = f"if it is the default of {settings}, name that setting in its paragraph"
            if markers:
                hint += f"; if it is a measured figure, write {markers[0]}"
        elif len(markers) == 1:
            hint = f"write {markers[0]}"
        elif markers:
            hint = f"write a marker of the figure it is, e.g. {markers[0]} ({len(markers)} match)"
        else:
            hint = (
                "write a marker of the results file that holds it, name the setting, reword, "
                "or mark the line <!-- fixed: why -->"
            )
        problems.append(
            f"line {figure.line}: {figure.number} in {figure.text!r} has no source: {hint}"
        )
    return problems


def sourced_page(src_uri: str) -> bool:
    """Whether every number with a unit on a page needs a source (`unsourced_figures`)."""
    if src_uri in HISTORY_PAGES:
        return False
    return src_uri.startswith(SOURCED_DIRECTORIES) or src_uri in SOURCED_FILES


# -- MkDocs events --------------------------------------------------------------------------------


# What every page is checked against, read once per build (`on_pre_build`).
_published: list[tuple[str, str, float]] = []
_defaults: set[float] = set()
_default_figures: list[SettingDefault] = []


def on_pre_build(config: Any) -> None:
    """Reads the results files' figures and the settings' defaults once for the build."""
    global _published, _defaults, _default_figures
    _published = published_figures(Path(config["docs_dir"]) / RESULTS)
    _defaults = setting_defaults()
    _default_figures = setting_default_figures()


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the markers of a page, and checks it for figures typed by hand."""
    directory = Path(config["docs_dir"]) / RESULTS
    # Errors, not warnings: `mkdocs build --quiet` (`make docs`) drops warnings before
    # `--strict` counts them, but counts errors, so the build fails either way.
    if page.file.src_uri not in HISTORY_PAGES:
        for problem in typed_figures(markdown, _published, _defaults):
            log.error("%s: %s", page.file.src_uri, problem)
    if sourced_page(page.file.src_uri):
        for problem in unsourced_figures(markdown, _default_figures, _published):
            log.error("%s: %s", page.file.src_uri, problem)
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
