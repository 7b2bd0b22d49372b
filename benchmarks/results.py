"""Benchmark results files: what a run measured, kept for the documentation site.

A full run of a benchmark ends by writing `docs/benchmarks/results/<name>.json` (its figures, the
date, the commit of the checkout and the arguments it ran with) and, for the search and quality
benchmarks, plots of its figures beside it (`<name>-*.png`, matplotlib's Agg backend). The site's
benchmark pages render their tables from these files when it is built (`docs/hooks/`), so no
figure is typed twice. `--tiny` runs write nothing unless `--results-dir` says where.

A run's printed output can be published afterwards from its saved log, whose last JSON line is
the run's figures:

    .venv/bin/python -m benchmarks.results search /work/runs/search-1m.log
    .venv/bin/python -m benchmarks.results quality quality.log --commit 3f5752f --results-dir DIR

(the date is then the log's modification time and the commit the checkout's, unless `--date`
and `--commit` give the run's own).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.levels import level_growth

REPO = Path(__file__).resolve().parents[1]
DOCS_RESULTS = REPO / "docs" / "benchmarks" / "results"

# Every benchmark that ends in a JSON line, by the name of its results file.
BENCHMARKS = (
    "search",
    "search-user-form",
    "quality",
    "ingest",
    "crawl",
    "large_inputs",
    "soak",
    # The soak run long enough to show memory levelling off (`--warmup-minutes 60 --minutes 60`).
    "soak-plateau",
    "chaos",
    "encoder",
    "bulk",
    "migrate",
)

# -- the search benchmark's keys (benchmarks/search.py, benchmarks/search_stores.py) -----------

LATENCY = re.compile(
    r"^(?P<figure>p50_ms|p95_ms|p99_ms|rps)_(?P<cache>uncached|cached)_c(?P<c>\d+)"
)
STORE_SUFFIX = re.compile(r"^(?:_(?P<store>duplicates|distinct))?(?:_(?P<n>\d+)(?P<unit>[km]))?$")
# The search benchmark's figures measured once per run, not per store.
SEARCH_RUN_KEYS = ("chunks", "stores", "sources", "goals")
LATENCY_FIGURES = ("p50_ms", "p95_ms", "p99_ms", "rps")
REFERENCE_CHUNKS = 100_000
LARGE_CHUNKS = 1_000_000

# -- the quality benchmark's keys (benchmarks/quality.py) ----------------------------------------

METRICS = {"recall4": "recall@4", "recall10": "recall@10", "mrr10": "MRR@10", "ndcg10": "nDCG@10"}
# `<set>_<metric>_<mode>`: the man pages' keys have no set, `--fusions` adds hybrid variants
# (`hybrid_convex0.6`, `hybrid_rrf60`).
QUALITY_KEY = re.compile(
    r"^(?P<set>(?:[a-z]+_)*?)(?P<metric>recall4|recall10|mrr10|ndcg10)"
    r"_(?P<mode>dense|sparse|hybrid(?:_[a-z]+[0-9.]*)?)$"
)


# -- writing -------------------------------------------------------------------------------------


def write_results(
    name: str,
    figures: Mapping[str, Any],
    *,
    directory: Path = DOCS_RESULTS,
    arguments: Sequence[str] | None = None,
    date: datetime | None = None,
    commit: str | None = None,
    source: str | None = None,
) -> Path:
    """Writes `<directory>/<name>.json` with the run's figures, date, commit and arguments, and
    the plots its figures allow (`<name>-*.png`, replacing the previous run's); returns the JSON
    file's path."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; one of {', '.join(BENCHMARKS)}")
    directory.mkdir(parents=True, exist_ok=True)
    figures = with_derived(name, figures)
    # Before the plots replace the last run's: they are tracked files, not uncommitted changes.
    head, dirty = _checkout()
    for old in directory.glob(f"{name}-*.png"):
        if not _plot_of_another(name, old.name):
            old.unlink()
    plots = draw_plots(name, figures, directory)
    record: dict[str, Any] = {
        "benchmark": name,
        "date": (date or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit or head,
        # A published log's run may have been made at another commit than the checkout's.
        "commit_of": "run" if commit or source is None else "publication",
        "dirty": None if commit or source is not None else dirty,
        "arguments": None if arguments is None else list(arguments),
        "source": source,
        "plots": plots,
        "figures": dict(figures),
    }
    path = directory / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _plot_of_another(name: str, filename: str) -> bool:
    """True for another benchmark's plot that starts with this one's name (`search-user-form-*`
    beside `search-*`)."""
    return any(
        other != name and other.startswith(f"{name}-") and filename.startswith(f"{other}-")
        for other in BENCHMARKS
    )


def _checkout() -> tuple[str | None, bool | None]:
    """The repository's commit and whether tracked files differ from it (None, None without
    git or outside a checkout)."""
    git = shutil.which("git")
    if git is None:
        return None, None
    try:
        head = _git(git, "rev-parse", "HEAD")
        changes = _git(git, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return head, bool(changes)


def _git(git: str, *arguments: str) -> str:
    done = subprocess.run([git, *arguments], cwd=REPO, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def results_directory(tiny: bool, given: Path | None) -> Path | None:
    """Where a run writes its results: `--results-dir` if given, else nowhere for a tiny run
    (it must not replace the site's figures) and the site's results for a full one."""
    if given is not None:
        return given
    return None if tiny else DOCS_RESULTS


def add_results_option(parser: argparse.ArgumentParser) -> None:
    """`--results-dir`, for a benchmark's argument parser."""
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help="write the results file and plots here (default: docs/benchmarks/results, "
        "and nowhere for --tiny)",
    )


def publish(name: str, figures: Mapping[str, Any], *, tiny: bool, results_dir: Path | None) -> None:
    """The end of a benchmark's run, after its JSON line: writes its results where
    `results_directory` says (nothing for a tiny run without `--results-dir`) and says so on
    stderr, so the last line on stdout stays the JSON object."""
    directory = results_directory(tiny, results_dir)
    if directory is None:
        return
    path = write_results(name, figures, directory=directory, arguments=sys.argv[1:])
    print(f"results written to {path}", file=sys.stderr)


def report(
    name: str, figures: Mapping[str, Any], args: argparse.Namespace, problems: Sequence[str]
) -> None:
    """The end of a benchmark's run: its figures as the last line on stdout (one JSON object),
    its results published (`publish`, by its `--tiny` and `--results-dir`), and an exit 1 if it
    lost or corrupted data (`exit_if_data_was_lost`)."""
    print(json.dumps(figures))
    publish(name, figures, tiny=args.tiny, results_dir=args.results_dir)
    exit_if_data_was_lost(name, problems)


def exit_if_data_was_lost(name: str, problems: Sequence[str]) -> None:
    """The very end of a benchmark's run (after its JSON line and its results): a run that lost
    or corrupted data names what on stderr and exits 1, whatever its figures."""
    if problems:
        for problem in problems:
            print(f"{name}: {problem}", file=sys.stderr)
        raise SystemExit(1)


# -- plots ---------------------------------------------------------------------------------------


def with_derived(name: str, figures: Mapping[str, Any]) -> dict[str, Any]:
    """The figures, with those a run made before they were printed derived from its own
    series: a soak's level growth (`benchmarks.levels`) from its per-minute memory."""
    figures = dict(figures)
    if name in ("soak", "soak-plateau") and "private_mb_per_minute" in figures:
        warmup = int(figures.get("warmup_minutes") or 0)
        minutes = math.ceil(float(figures.get("minutes") or 0))
        for kind in ("rss", "private"):
            key = f"{kind}_level_growth_pct"
            if key not in figures:
                series = figures[f"{kind}_mb_per_minute"]
                figures[key] = level_growth(series, warmup, minutes)
    return figures


def draw_plots(name: str, figures: Mapping[str, Any], directory: Path) -> list[str]:
    """The plots of a run's figures, written into `directory`; their file names."""
    if name == "search":
        return _search_plots(figures, directory)
    if name == "quality":
        return _quality_plots(figures, directory)
    if name == "chaos":
        return _chaos_plots(figures, directory)
    if name in ("soak", "soak-plateau"):
        return _soak_plots(figures, directory, name)
    return []


def store_of(suffix: str) -> tuple[str, int]:
    """A search figure's store and size from its keys' suffix (`search_stores.suffix`): '' is
    the duplicate-heavy store at 100,000 chunks, `_distinct` the distinct one, `_1m` the
    distinct one at a million, `_duplicates_1m` the duplicate-heavy one there, `_distinct_2k`
    the distinct one at 2,000."""
    match = STORE_SUFFIX.match(suffix)
    if match is None:
        raise ValueError(f"not a store's suffix: {suffix!r}")
    number, unit = match["n"], match["unit"]
    chunks = REFERENCE_CHUNKS
    if number is not None:
        chunks = int(number) * (1000 if unit == "k" else LARGE_CHUNKS)
    store = match["store"] or ("distinct" if chunks >= LARGE_CHUNKS else "duplicates")
    return store, chunks


def store_label(suffix: str) -> str:
    """`duplicates-100k`, `distinct-1m`, ...: a store and its size, for titles and file names."""
    store, chunks = store_of(suffix)
    size = f"{chunks // LARGE_CHUNKS}m" if chunks % LARGE_CHUNKS == 0 else f"{chunks // 1000}k"
    return f"{store}-{size}"


def _by_size(suffix: str) -> tuple[int, bool]:
    """Smaller stores first; at one size the duplicate-heavy store first, as the benchmark
    measures them."""
    store, chunks = store_of(suffix)
    return chunks, store != "duplicates"


def search_latency(
    figures: Mapping[str, Any],
) -> dict[str, dict[tuple[str, int], dict[str, float]]]:
    """The search figures of each store (by its keys' suffix): per (cache, concurrency) its
    p50/p95/p99 ms and requests/s."""
    stores: dict[str, dict[tuple[str, int], dict[str, float]]] = {}
    for key, value in figures.items():
        match = LATENCY.match(key)
        if match is None or not isinstance(value, int | float):
            continue
        suffix = key[match.end() :]
        if STORE_SUFFIX.match(suffix) is None:
            continue
        load = (match["cache"], int(match["c"]))
        stores.setdefault(suffix, {}).setdefault(load, {})[match["figure"]] = float(value)
    return stores


def _search_plots(figures: Mapping[str, Any], directory: Path) -> list[str]:
    written = []
    for suffix, loads in sorted(search_latency(figures).items(), key=lambda s: _by_size(s[0])):
        label = store_label(suffix)
        figure, axes = _figure(2)
        for axis, cache in zip(axes, ("uncached", "cached"), strict=True):
            levels = sorted(c for kind, c in loads if kind == cache)
            plotted = False
            for percentile, style in (("p50_ms", "o-"), ("p95_ms", "s--")):
                points = [
                    (c, loads[(cache, c)][percentile])
                    for c in levels
                    if percentile in loads[(cache, c)]
                ]
                if points:
                    axis.plot(
                        [p[0] for p in points], [p[1] for p in points], style, label=percentile[:3]
                    )
                    plotted = True
            axis.set_title(f"{cache}, {label}")
            axis.set_xscale("log", base=2)
            axis.set_xticks(levels, [str(c) for c in levels])
            axis.set_xlabel("concurrent requests")
            axis.set_ylabel("latency (ms)")
            axis.set_ylim(bottom=0)
            axis.grid(alpha=0.3)
            if plotted:
                axis.legend()
        filename = f"search-latency-{label}.png"
        _save(figure, directory / filename)
        written.append(filename)
    return written


def quality_figures(figures: Mapping[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """The quality figures of each set (`manpages` for the unprefixed keys): per mode, each
    metric."""
    sets: dict[str, dict[str, dict[str, float]]] = {}
    for key, value in figures.items():
        match = QUALITY_KEY.match(key)
        if match is None or not isinstance(value, int | float):
            continue
        name = match["set"].rstrip("_") or "manpages"
        sets.setdefault(name, {}).setdefault(match["mode"], {})[match["metric"]] = float(value)
    return sets


def _quality_plots(figures: Mapping[str, Any], directory: Path) -> list[str]:
    written = []
    for name, modes in sorted(quality_figures(figures).items()):
        figure, axes = _figure(1, width=7.0)
        axis = axes[0]
        width = 0.8 / len(modes)
        for n, (mode, scores) in enumerate(modes.items()):
            positions = [m + (n - (len(modes) - 1) / 2) * width for m in range(len(METRICS))]
            axis.bar(positions, [scores.get(m, 0.0) for m in METRICS], width, label=mode)
        axis.set_xticks(range(len(METRICS)), list(METRICS.values()))
        axis.set_ylim(0, 1)
        axis.set_title(f"{name.replace('_', ' ')}: by retrieval mode")
        axis.grid(axis="y", alpha=0.3)
        figure.legend(loc="outside right upper")
        filename = f"quality-{name.replace('_', '-')}.png"
        _save(figure, directory / filename)
        written.append(filename)
    return written


def _chaos_plots(figures: Mapping[str, Any], directory: Path) -> list[str]:
    """The chaos soak's timeline: each fault as a bar on its part's row, and below, the
    searches not answered within the bound per 10 s."""
    timeline = figures.get("timeline") or {}
    faults = timeline.get("faults") or []
    errors = timeline.get("errors_per_10s") or []
    if not faults and not errors:
        return []
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 5.5), layout="constrained")
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    parts = sorted({kind.split(" ", 1)[1] for _, _, kind in faults})
    for begin, end, kind in faults:
        action, part = kind.split(" ", 1)
        top.broken_barh(
            [(begin, max(end - begin, 1.0))],
            (parts.index(part) - 0.35, 0.7),
            color="tab:red" if action == "kill" else "tab:blue",
        )
    top.set_yticks(range(len(parts)), parts)
    top.set_title("faults (red: killed until back, blue: frozen)")
    top.grid(axis="x", alpha=0.3)
    bottom.bar([10 * n + 5 for n in range(len(errors))], errors, width=9, color="tab:gray")
    bottom.set_ylim(bottom=0)
    bottom.set_ylabel("searches unanswered")
    bottom.set_xlabel("seconds into the load")
    bottom.grid(axis="y", alpha=0.3)
    _save(figure, directory / "chaos-timeline.png")
    return ["chaos-timeline.png"]


def _soak_plots(figures: Mapping[str, Any], directory: Path, name: str) -> list[str]:
    """The soak's memory by process, minute by minute (RSS, and private memory: RSS without
    the pages of mapped files), with the warm-up's end marked."""
    rss = figures.get("rss_mb_per_minute") or {}
    private = figures.get("private_mb_per_minute") or {}
    if not rss:
        return []
    figure, axes = _figure(2, width=6.0)
    warmup = figures.get("warmup_minutes")
    for axis, series, title in ((axes[0], rss, "RSS"), (axes[1], private, "private memory")):
        for process, values in sorted(series.items()):
            axis.plot(range(1, len(values) + 1), values, label=process)
        if warmup:
            axis.axvline(warmup, color="gray", linestyle="--", linewidth=1)
        axis.set_title(f"{title}, MB (dashed: the warm-up's end)")
        axis.set_xlabel("minute")
        axis.set_yscale("log")
        axis.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    _save(figure, directory / f"{name}-memory.png")
    return [f"{name}-memory.png"]


def _figure(panels: int, width: float = 5.0) -> tuple[Any, list[Any]]:
    """A matplotlib figure (Agg, no pyplot state) of `panels` side by side, each `width` inches
    wide."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width * panels, 3.6), layout="constrained")
    axes = figure.subplots(1, panels, squeeze=False)[0]
    return figure, list(axes)


def _save(figure: Any, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=100, metadata={"Software": None})


# -- reading a log -------------------------------------------------------------------------------


def last_json_object(lines: Iterable[str]) -> dict[str, Any]:
    """The last line that is one JSON object (what every benchmark prints last)."""
    found: dict[str, Any] | None = None
    for line in lines:
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found = value
    if found is None:
        raise ValueError("no line is a JSON object")
    return found


# -- rendering, for the documentation site -------------------------------------------------------


def load(name: str, directory: Path = DOCS_RESULTS) -> dict[str, Any] | None:
    """A benchmark's results file, or None when none was written yet."""
    path = directory / f"{name}.json"
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(record, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return record


def render_markdown(record: Mapping[str, Any], link_prefix: str = "results/") -> str:
    """A results file as Markdown: when and how it ran, its tables and its plots (linked under
    `link_prefix`, relative to the page)."""
    name = str(record["benchmark"])
    figures: Mapping[str, Any] = record["figures"]
    parts = [_provenance(record, link_prefix)]
    if name == "search":
        parts.append(_search_markdown(figures, record.get("plots") or [], link_prefix))
    elif name == "quality":
        parts.append(_quality_markdown(figures, record.get("plots") or [], link_prefix))
    else:
        shown = {k: v for k, v in figures.items() if k != "timeline"}
        parts.append(_key_value_table(shown))
        parts += [f"![{name}]({link_prefix}{plot})" for plot in record.get("plots") or []]
    return "\n\n".join(part for part in parts if part) + "\n"


def _provenance(record: Mapping[str, Any], link_prefix: str) -> str:
    name = str(record["benchmark"])
    commit = record.get("commit")
    text = f"Run of {record['date']}, "
    text += f"commit `{str(commit)[:10]}`" if commit else "commit unknown"
    if commit and record.get("commit_of") == "publication":
        text += " (the checkout's when it was published)"
    if record.get("dirty"):
        text += " (with uncommitted changes)"
    arguments = record.get("arguments")
    if arguments is not None:
        # A variant's file is named for its benchmark and what it ran: `search-user-form`.
        module = name.partition("-")[0]
        text += f": `{' '.join(['python -m', f'benchmarks.{module}', *arguments])}`"
    if record.get("source"):
        text += f"; published from its log (`{Path(str(record['source'])).name}`)"
    return f"{text}. Every figure of the run: [{name}.json]({link_prefix}{name}.json)."


def _search_markdown(figures: Mapping[str, Any], plots: Sequence[str], link_prefix: str) -> str:
    stores = search_latency(figures)
    suffixes = sorted(stores, key=_by_size)
    parts: list[str] = []
    for suffix in suffixes:
        label = store_label(suffix)
        loads = sorted(stores[suffix], key=lambda load: (load[0] != "uncached", load[1]))
        rows = [
            [
                f"{cache} c{c}",
                *[_number(stores[suffix][(cache, c)].get(f)) for f in LATENCY_FIGURES],
            ]
            for cache, c in loads
        ]
        parts.append(f"#### {label}")
        parts.append(_table(["load", "p50 ms", "p95 ms", "p99 ms", "requests/s"], rows))
        budget = _step_budget(figures, suffix)
        if budget:
            parts.append(budget)
        plot = f"search-latency-{label}.png"
        if plot in plots:
            parts.append(f"![search latency, {label}]({link_prefix}{plot})")
    per_store, per_run = _search_other_figures(figures, suffixes)
    if per_store:
        rows = [
            [f"`{base}`", *[_value(by_store.get(s)) for s in suffixes]]
            for base, by_store in per_store.items()
        ]
        parts.append("#### Other figures per store")
        parts.append(_table(["figure", *[store_label(s) for s in suffixes]], rows))
    goals = per_run.pop("goals", None)
    if per_run:
        parts.append("#### Once per run")
        parts.append(_key_value_table(per_run))
    if isinstance(goals, Mapping) and goals:
        parts.append("#### Goals")
        parts.append(_goals_table(goals))
    return "\n\n".join(parts)


# The per-step tables of a store: the server's steps at concurrency 1, uncached and cached.
STEP_TABLES = ("steps_uncached_c1", "steps_cached_c1")


def _step_budget(figures: Mapping[str, Any], suffix: str) -> str:
    """The server's time per step of a search at concurrency 1 (its answers' own timings),
    uncached and cached, p50 and p95; `transport` is what the client waited beyond them."""
    tables = [figures.get(f"{name}{suffix}") for name in STEP_TABLES]
    if not any(isinstance(table, Mapping) for table in tables):
        return ""
    steps = list(next(t for t in tables if isinstance(t, Mapping)))
    rows = []
    for step in steps:
        row = [step]
        for table in tables:
            cell = table.get(step, {}) if isinstance(table, Mapping) else {}
            row += [_number(cell.get("p50")), _number(cell.get("p95"))]
        rows.append(row)
    header = ["step (ms)", "uncached p50", "uncached p95", "cached p50", "cached p95"]
    return "Time per step at concurrency 1:\n\n" + _table(header, rows)


def _search_other_figures(
    figures: Mapping[str, Any], suffixes: Sequence[str]
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The figures not in the latency tables: those of a store, by their key without the
    store's suffix, and those of the run."""
    longest_first = sorted(suffixes, key=len, reverse=True)
    per_store: dict[str, dict[str, Any]] = {}
    per_run: dict[str, Any] = {}
    for key, value in figures.items():
        match = LATENCY.match(key)
        if match is not None and key[match.end() :] in suffixes:
            continue
        if key.startswith("encoder_") or key in SEARCH_RUN_KEYS:
            per_run[key] = value
            continue
        suffix = next((s for s in longest_first if key.endswith(s)), None)
        if suffix is not None and key[: len(key) - len(suffix)] in STEP_TABLES:
            continue
        if suffix is None:
            per_run[key] = value
            continue
        base = key[: len(key) - len(suffix)] if suffix else key
        per_store.setdefault(base, {})[suffix] = value
    return per_store, per_run


def _quality_markdown(figures: Mapping[str, Any], plots: Sequence[str], link_prefix: str) -> str:
    parts: list[str] = []
    sets = quality_figures(figures)
    intervals: Mapping[str, Sequence[float]] = figures.get("intervals") or {}

    def cell(name: str, mode: str, metric: str, value: float | None) -> str:
        interval = intervals.get(f"{name}/{mode}/{metric}")
        if value is None or not interval:
            return _number(value)
        return f"{_number(value)} [{interval[0]:.3f}, {interval[1]:.3f}]"

    for name, modes in sets.items():
        parts.append(f"#### {name.replace('_', ' ')}")
        rows = [
            [mode, *[cell(name, mode, m, scores.get(m)) for m in METRICS]]
            for mode, scores in modes.items()
        ]
        parts.append(_table(["mode", *METRICS.values()], rows))
        plot = f"quality-{name.replace('_', '-')}.png"
        if plot in plots:
            parts.append(f"![quality, {name}]({link_prefix}{plot})")
    if intervals:
        parts.append("Each figure with its 95% bootstrap interval, in brackets.")
    paired = figures.get("paired") or {}
    if paired:
        parts.append("#### Paired comparisons")
        parts.append(_paired_table(paired))
    rest = {
        k: v
        for k, v in figures.items()
        if QUALITY_KEY.match(k) is None and k not in ("intervals", "paired")
    }
    goals = rest.pop("goals", None)
    if rest:
        parts.append("#### Other figures")
        parts.append(_key_value_table(rest))
    if isinstance(goals, Mapping) and goals:
        parts.append("#### Goals")
        parts.append(_goals_table(goals))
    return "\n\n".join(parts)


def _paired_table(paired: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """Two modes compared question by question: per metric, the mean difference with its
    interval, the questions won, lost and tied, the randomisation test's p-value, and whether
    the difference is significant (p < 0.05)."""
    rows = []
    for comparison, metrics in paired.items():
        for metric, p in metrics.items():
            low, high = p["interval"]
            rows.append(
                [
                    comparison,
                    METRICS.get(metric, metric),
                    f"{p['difference']:+.4f} [{low:+.3f}, {high:+.3f}]",
                    f"{p['wins']} / {p['losses']} / {p['ties']}",
                    f"{p['p_value']:.3f}",
                    "**significant**" if p["significant"] else "not significant",
                ]
            )
    return _table(["comparison", "metric", "difference", "won / lost / tied", "p", "verdict"], rows)


def _goals_table(goals: Mapping[str, Any]) -> str:
    rows = []
    for goal, verdict in goals.items():
        if isinstance(verdict, Mapping):
            value, met = verdict.get("value"), verdict.get("met")
        else:
            value, met = None, verdict
        shown = "not measured" if met is None else ("met" if met else "**missed**")
        rows.append([f"`{goal}`", _value(value), shown])
    return _table(["goal", "figure", "verdict"], rows)


def _key_value_table(figures: Mapping[str, Any]) -> str:
    rows = [[f"`{key}`", _value(value)] for key, value in _flatten(figures)]
    return _table(["figure", "value"], rows) if rows else ""


def _flatten(value: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested objects' leaves, keyed by their path (`pdf_30_pages.peak_rss_mb.api`)."""
    flat: list[tuple[str, Any]] = []
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, Mapping) and item:
            flat.extend(_flatten(item, f"{path}."))
        else:
            flat.append((path, item))
    return flat


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return _cell(value)
    return f"`{_cell(json.dumps(value, ensure_ascii=False))}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}"]
    lines.extend(f"| {' | '.join(row)} |" for row in rows)
    return "\n".join(lines)


# -- python -m benchmarks.results ----------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Publishes a saved benchmark log's figures as that benchmark's results files."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.results",
        description="Write a benchmark's results files from the last JSON line of its saved log.",
    )
    parser.add_argument("name", choices=BENCHMARKS, help="the benchmark the log is of")
    parser.add_argument("log", type=Path, help="the run's saved output")
    parser.add_argument("--results-dir", type=Path, default=DOCS_RESULTS)
    parser.add_argument("--commit", help="the commit the run was made at (default: the checkout's)")
    parser.add_argument(
        "--date", help="when the run ended, ISO 8601 (default: the log's modification time)"
    )
    args = parser.parse_args(argv)
    try:
        text = args.log.read_text(encoding="utf-8", errors="replace")
        figures = last_json_object(text.splitlines())
    except (OSError, ValueError) as exc:
        parser.error(f"{args.log}: {exc}")
    date = (
        datetime.fromisoformat(args.date)
        if args.date
        else datetime.fromtimestamp(args.log.stat().st_mtime, UTC)
    )
    if date.tzinfo is None:
        date = date.replace(tzinfo=UTC)
    path = write_results(
        args.name,
        figures,
        directory=args.results_dir,
        date=date,
        commit=args.commit,
        source=str(args.log),
    )
    print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


@dataclass(frozen=True)
class Goal:
    """One of the issue's goals: a figure's key, a bound and its direction."""

    key: str
    bound: float
    at_most: bool

    @property
    def name(self) -> str:
        """How it is printed: `p95_ms_uncached_c1_distinct <= 20`."""
        return f"{self.key} {'<=' if self.at_most else '>='} {self.bound:g}"

    def met(self, value: float) -> bool:
        """Whether a value meets it."""
        return value <= self.bound if self.at_most else value >= self.bound


def judge(figures: dict[str, Any], goals: Sequence[Goal]) -> dict[str, dict[str, Any]]:
    """Each goal's figure and whether it is met (both None where this run did not measure
    it)."""
    judged: dict[str, dict[str, Any]] = {}
    for goal in goals:
        value = figures.get(goal.key)
        met = None if value is None else goal.met(float(value))
        judged[goal.name] = {"value": value, "met": met}
    return judged
