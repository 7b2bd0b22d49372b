"""Code and documentation state the project's behaviour themselves: no tracked text cites an
outside document by a "seed" number (such as 003) in its place."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = (".py", ".md", ".toml", ".yml", ".yaml")
SKIPPED = (".venv/", "site/", "tests/fixtures/")
REFERENCE = re.compile(r"(?<![a-z])seeds?[\s_]+00\d", re.IGNORECASE)


def tracked_text_files() -> list[Path]:
    """The tracked files this test reads, from the repository's own listing."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        [git, "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout
    return [
        ROOT / name
        for name in listed.split("\0")
        if name.endswith(CHECKED) and not name.startswith(SKIPPED)
    ]


def references(path: Path) -> list[str]:
    """Where a file points at a reference document: `path:line: text` each time."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found = []
    for match in REFERENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        found.append(f"{path.relative_to(ROOT)}:{line}: {match.group()}")
    return found


def test_no_file_points_at_a_reference_document() -> None:
    files = tracked_text_files()

    assert ROOT / "infra" / "settings" / "__init__.py" in files
    assert [found for path in files if path.exists() for found in references(path)] == []


def test_the_check_finds_a_reference_and_leaves_random_seeds_alone() -> None:
    number = "00" + "2"  # spelled apart, so that this file does not hold a reference itself
    assert REFERENCE.search(f"Wiki pages (Seed {number}): Markdown pages")
    assert REFERENCE.search(f"as seeds\n{number} specify")
    assert REFERENCE.search(f"def test_reads_as_seed_{number}_says")
    assert not REFERENCE.search("random.Random(seed=7); SEED = 20_250_601; seeded resources")
