"""`ragline-cli` built from `cli/` and installed into a fresh virtual environment, as on a
laptop: it brings only itself and its three dependencies (httpx, typer, rich, with what they
need), and its `ragline` command runs there."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from email.parser import Parser
from importlib.metadata import Distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Distributions of the server (or its stack) that must never come with the CLI. (pydantic
# does come: typer itself requires it; the CLI does not import it.)
SERVER = {"ragline", "fastapi", "uvicorn", "pymongo", "qdrant-client", "torch", "faststream"}


def _pip(python: Path, *args: str) -> str:
    return subprocess.run(
        [str(python), "-m", "pip", "--disable-pip-version-check", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture(scope="module")
def laptop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the CLI's wheel installed (dependencies from the package index)."""
    where = tmp_path_factory.mktemp("laptop")
    _pip(
        Path(sys.executable),
        "wheel",
        "--no-deps",
        "--wheel-dir",
        str(where / "wheels"),
        str(ROOT / "cli"),
    )
    (wheel,) = (where / "wheels").glob("ragline_cli-*.whl")
    venv.create(where / "venv", with_pip=True)
    _pip(where / "venv" / "bin" / "python", "install", "--quiet", str(wheel))
    return where / "venv"


def _site_packages(env: Path) -> Path:
    (found,) = env.glob("lib/python*/site-packages")
    return found


def test_the_wheel_declares_only_httpx_typer_and_rich(laptop: Path) -> None:
    (meta,) = _site_packages(laptop).glob("ragline_cli-*.dist-info/METADATA")
    requires = Parser().parsestr(meta.read_text()).get_all("Requires-Dist") or []
    assert sorted(r.split("==")[0] for r in requires) == ["httpx", "rich", "typer"]


def test_installing_it_adds_one_top_level_package_and_nothing_of_the_server(laptop: Path) -> None:
    site = _site_packages(laptop)
    (info,) = site.glob("ragline_cli-*.dist-info")
    files = [str(f) for f in Distribution.at(info).files or []]
    top_level = {f.split("/")[0] for f in files if not f.startswith(("../", "ragline_cli-"))}
    assert top_level == {"ragline_cli"}
    installed = {Distribution.at(d).metadata["Name"].lower() for d in site.glob("*.dist-info")}
    assert {"ragline-cli", "httpx", "typer", "rich"} <= installed
    assert installed & SERVER == set()
    assert not any((site / name).exists() for name in ("api", "core", "infra", "schemas"))


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
