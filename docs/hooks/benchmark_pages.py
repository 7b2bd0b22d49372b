"""MkDocs hook: the benchmark pages' method and latest figures, from the benchmarks themselves.

- `<!-- generated: benchmark-method search -->` becomes the module docstring of
  `benchmarks/search.py`: how the benchmark works, as its code documents it.
- `<!-- generated: benchmark-results search -->` becomes the tables (and plots) of
  `docs/benchmarks/results/search.json`, the results file the benchmark's last full run wrote
  (`benchmarks/results.py`), or a note that there is none yet.
"""

from __future__ import annotations

import ast
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

MARKER = re.compile(r"<!-- generated: benchmark-(?P<what>method|results) (?P<name>[\w-]+) -->")
RESULTS = "benchmarks/results"  # under the docs directory


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


# -- MkDocs events --------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the markers of a page."""
    if "<!-- generated: benchmark-" not in markdown:
        return markdown
    directory = Path(config["docs_dir"]) / RESULTS
    page_dir = posixpath.dirname(page.file.src_uri)
    prefix = posixpath.relpath(RESULTS, page_dir or ".") + "/"

    def fill(match: re.Match[str]) -> str:
        if match["what"] == "method":
            return method(match["name"])
        return results(match["name"], directory, prefix)

    return MARKER.sub(fill, markdown)
