"""`ragline-cli` built from `cli/` and installed into a fresh virtual environment, as on a
laptop: the client library it is built on is not on the package index, so both wheels (`client/`
and `cli/`) are built into one folder that pip finds them in, every other dependency coming from
the index. The CLI brings only itself, the library and its three declared dependencies
(ragline-client, typer, rich, with what they need), nothing of the server, and its `ragline`
command runs there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import venv
from email.parser import Parser
from importlib.metadata import Distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Distributions of the server (or its stack) that must never come with the CLI.
SERVER = {"ragline", "fastapi", "uvicorn", "pymongo", "qdrant-client", "torch", "faststream"}
LEFT_BEHIND = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__")


def _pip(python: Path, *args: str) -> str:
    return subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="module")
def laptop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the CLI's wheel installed, the library's wheel found beside it."""
    where = tmp_path_factory.mktemp("laptop")
    wheels = where / "wheels"
    # Built from copies of the sources: a build leaves `build/` behind, whose stale modules
    # the next wheel built in place would ship.
    sources = [where / "src" / name for name in ("client", "cli")]
    for source in sources:
        shutil.copytree(ROOT / source.name, source, ignore=LEFT_BEHIND)
    _pip(
        Path(sys.executable),
        "wheel",
        "--no-deps",
        "--wheel-dir",
        str(wheels),
        *map(str, sources),
    )
    (wheel,) = wheels.glob("ragline_cli-*.whl")
    venv.create(where / "venv", with_pip=True)
    python = where / "venv" / "bin" / "python"
    _pip(python, "install", "--quiet", "--find-links", str(wheels), str(wheel))
    return where / "venv"


def _site_packages(env: Path) -> Path:
    (found,) = env.glob("lib/python*/site-packages")
    return found


def test_the_wheel_declares_only_the_client_library_typer_and_rich(laptop: Path) -> None:
    (meta,) = _site_packages(laptop).glob("ragline_cli-*.dist-info/METADATA")
    requires = Parser().parsestr(meta.read_text()).get_all("Requires-Dist") or []
    assert sorted(r.split("==")[0] for r in requires) == ["ragline-client", "rich", "typer"]
    declared = tomllib.loads((ROOT / "cli" / "pyproject.toml").read_text())["project"]
    assert sorted(requires) == sorted(declared["dependencies"])  # as pinned there


def test_installing_it_brings_the_cli_and_the_library_and_nothing_of_the_server(
    laptop: Path,
) -> None:
    site = _site_packages(laptop)
    installed = {Distribution.at(d).metadata["Name"].lower() for d in site.glob("*.dist-info")}
    assert {"ragline-cli", "ragline-client", "typer", "rich"} <= installed
    assert installed & SERVER == set()
    assert not any((site / name).exists() for name in ("api", "core", "infra", "schemas"))

    def top_level(distribution: str) -> set[str]:
        (info,) = site.glob(f"{distribution}-*.dist-info")
        files = [str(f) for f in Distribution.at(info).files or []]
        return {f.split("/")[0] for f in files if not f.startswith(("../", f"{distribution}-"))}

    assert top_level("ragline_cli") == {"ragline_cli"}
    assert top_level("ragline_client") == {"ragline_client"}
    # The library is the one built from client/, not a namesake from the package index.
    installed_init = site / "ragline_client" / "__init__.py"
    assert (
        installed_init.read_text()
        == (ROOT / "client" / "ragline_client" / "__init__.py").read_text()
    )


def test_its_command_runs_and_says_what_is_missing(laptop: Path) -> None:
    help_text = subprocess.run(
        [str(laptop / "bin" / "ragline"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "search" in help_text
    unconfigured = subprocess.run(
        [str(laptop / "bin" / "ragline"), "kb", "list"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "HOME": str(laptop), "XDG_CONFIG_HOME": str(laptop)},
    )
    assert unconfigured.returncode == 3, unconfigured.stderr
    assert "RAGLINE_URL" in unconfigured.stderr + unconfigured.stdout
