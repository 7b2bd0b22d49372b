"""Reading the hand-written Markdown tables of a page, for the hooks that check them."""

from __future__ import annotations


def table_rows(markdown: str, header: str) -> list[list[str]]:
    """The body rows of every table of the page whose header row starts with `header` (such as
    `| method | path |`), each as its cells, stripped; the `|---` row is left out."""
    rows: list[list[str]] = []
    in_table = False
    for line in markdown.splitlines():
        if line.startswith(header):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
        if not in_table or line.startswith("|---"):
            continue
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows
