"""Memory attribution (`benchmarks.memory`): smaps summed by mapping, what grew between two
readings, and the Python allocation sites that grew between two tracemalloc snapshots, each
blamed on the project's own frame."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from benchmarks import memory

SMAPS = """\
55df531e2000-55df531e4000 r--p 00000000 fe:00 260386                     /usr/bin/python3
Size:                  8 kB
Rss:                   8 kB
Private_Clean:         8 kB
Private_Dirty:         0 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
55df531e4000-55df531ea000 rw-p 00000000 00:00 0                          [heap]
Size:                 24 kB
Rss:                  20 kB
Private_Clean:         0 kB
Private_Dirty:        20 kB
Anonymous:            20 kB
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
Rss:                 300 kB
Private_Dirty:       300 kB
Anonymous:           300 kB
7f0000400000-7f0000800000 rw-p 00000000 00:00 0
Rss:                 100 kB
Private_Dirty:       100 kB
Anonymous:           100 kB
7f1000000000-7f1000800000 r--s 00000000 fe:00 12          /data/vectors/seg-1.bin (deleted)
Rss:                 500 kB
Shared_Clean:        500 kB
Anonymous:             0 kB
"""


def test_smaps_are_summed_by_mapping_name() -> None:
    mappings = memory.parse_smaps(SMAPS)

    assert mappings["[anon]"] == {
        "mappings": 2,
        "Rss": 400,
        "Private_Clean": 0,
        "Private_Dirty": 400,
        "Anonymous": 400,
    }
    assert mappings["[heap]"]["Anonymous"] == 20
    # A file deleted while mapped (a replaced segment) is still its path.
    assert mappings["/data/vectors/seg-1.bin"]["Rss"] == 500
    assert memory.totals(mappings) == {"rss": 928, "anonymous": 420, "file": 508}


def test_a_process_trees_mappings_add_up() -> None:
    one = memory.parse_smaps(SMAPS)
    total = memory.add_mappings(memory.add_mappings({}, one), one)

    assert total["[anon]"]["Rss"] == 800
    assert total["[anon]"]["mappings"] == 4
    assert memory.totals(total)["file"] == 2 * 508


def test_growth_names_the_mappings_that_changed_most() -> None:
    start = memory.parse_smaps(SMAPS)
    end = memory.parse_smaps(
        SMAPS.replace("Rss:                 300 kB", "Rss:                2348 kB")
        .replace("Anonymous:           300 kB", "Anonymous:          2348 kB")
        .replace("[heap]", "[stack]")
    )

    growth = memory.mapping_growth(start, end)
    lines = memory.format_mappings(start, end)

    assert growth[0] == ("[anon]", 400, 2448)
    assert ("[heap]", 20, 0) in growth
    assert ("[stack]", 0, 20) in growth
    assert all(name != "/usr/bin/python3" for name, *_ in growth)  # unchanged
    assert "anonymous 0.4 -> 2.4 MB (+2.0)" in lines[0]
    assert "+2.0 MB" in lines[1]
    assert "[anon] (2 mappings)" in lines[1]


def test_snapshots_compared_blame_the_line_that_kept_memory(tmp_path: Path) -> None:
    kept: list[bytes] = []
    tracemalloc.start(10)
    try:
        start = tracemalloc.take_snapshot()
        kept.extend(bytes(1024) for _ in range(200))  # this line keeps ~200 kB
        end = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    start.dump(str(tmp_path / "start"))

    growers = memory.snapshot_growth(tracemalloc.Snapshot.load(str(tmp_path / "start")), end)
    lines = memory.format_growers(growers, (str(Path(__file__).parent),))

    top = growers[0]
    assert top.size_diff >= 200 * 1024
    assert top.count_diff >= 200
    assert top.frames[0][0] == __file__
    assert lines[0].lstrip().startswith("+0.2")
    assert "test_memory_attribution.py" in lines[0]


def test_blame_adds_the_projects_own_frame_when_the_allocation_is_in_a_library() -> None:
    frames = (
        ("/venv/lib/python3.12/site-packages/lib/cache.py", 10),
        ("/repo/services/search/thing.py", 42),
        ("/repo/api/app.py", 7),
    )

    assert (
        memory.blame(frames, ("/repo",))
        == "/venv/lib/python3.12/site-packages/lib/cache.py:10 <- services/search/thing.py:42"
    )
    assert memory.blame(frames[1:], ("/repo",)) == "/repo/services/search/thing.py:42"
    assert memory.blame((), ("/repo",)) == "?"
    # A library installed inside the project's directory is still a library.
    inside = (("/repo/.venv/lib/python3.12/site-packages/x.py", 1), *frames[1:])
    assert memory.blame(inside, ("/repo",)).endswith("<- services/search/thing.py:42")


def test_mallocs_figures_are_read_beside_the_snapshot(tmp_path: Path) -> None:
    snapshot = tmp_path / "api-42-1.tracemalloc"
    (tmp_path / "api-42-1.malloc.json").write_text(
        '{"heap": 10485760, "mmapped": 0, "in_use": 4194304, "free": 6291456}'
    )
    later = {"heap": 20971520, "mmapped": 0, "in_use": 4194304, "free": 16777216}

    figures = memory.malloc_figures(snapshot)

    assert figures["free"] == 6 * 2**20
    assert memory.malloc_figures(tmp_path / "gone-1-1.tracemalloc") == {}
    assert memory.format_malloc(figures, later) == (
        "  malloc: heap 10.0 -> 20.0 MB (+10.0), mmapped 0.0 -> 0.0 MB (+0.0), "
        "in_use 4.0 -> 4.0 MB (+0.0), free 6.0 -> 16.0 MB (+10.0)"
    )
