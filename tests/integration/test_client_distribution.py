"""`ragline-client` built from `client/` and installed into a fresh virtual environment, as in
an agent developer's project: it brings only itself, httpx and pydantic (with what they need),
ships its type information, and imports no framework until an integration is asked for.

Cost: about 20 s (a wheel build and a venv install from the package index's cache); no server.
"""

from __future__ import annotations

import re
import subprocess
import sys
import venv
from email.parser import Parser
from importlib.metadata import Distribution
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What httpx and pydantic themselves require (on Python 3.11).
ALLOWED = {
    "ragline-client",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "idna",
    "sniffio",
    "certifi",
    "pydantic",
    "pydantic-core",
    "annotated-types",
    "typing-extensions",
    "typing-inspection",
    "pip",
    "setuptools",
}


def _run(python: Path, *args: str) -> str:
    return subprocess.run([str(python), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the library's wheel installed (dependencies from the package index)."""
    where = tmp_path_factory.mktemp("project")
    _run(
        Path(sys.executable),
        "-m",
        "pip",
        "--disable-pip-version-check",
        "wheel",
        "--no-deps",
        "--wheel-dir",
        str(where / "wheels"),
        str(ROOT / "client"),
    )
    (wheel,) = (where / "wheels").glob("ragline_client-*.whl")
    venv.create(where / "venv", with_pip=True)
    python = where / "venv" / "bin" / "python"
    _run(python, "-m", "pip", "--disable-pip-version-check", "install", "--quiet", str(wheel))
    return where / "venv"


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (`Pydantic_Core>=2` -> `pydantic-core`)."""
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found is not None, requirement
    return re.sub(r"[-_.]+", "-", found.group()).lower()


def _site_packages(env: Path) -> Path:
    (found,) = env.glob("lib/python*/site-packages")
    return found


def test_it_declares_httpx_and_pydantic_and_its_integrations_as_extras(project: Path) -> None:
    (meta,) = _site_packages(project).glob("ragline_client-*.dist-info/METADATA")
    requires = Parser().parsestr(meta.read_text()).get_all("Requires-Dist") or []
    always = sorted(_name(r) for r in requires if "extra ==" not in r)
    assert always == ["httpx", "pydantic"]
    extras = {r.split(";")[1].strip() for r in requires if "extra ==" in r}
    assert extras == {'extra == "langchain"', 'extra == "llama-index"'}


def test_installing_it_brings_nothing_but_its_dependencies(project: Path) -> None:
    site = _site_packages(project)
    installed = {_name(Distribution.at(d).metadata["Name"]) for d in site.glob("*.dist-info")}
    assert installed - ALLOWED == set()
    (info,) = site.glob("ragline_client-*.dist-info")
    files = [str(f) for f in Distribution.at(info).files or []]
    assert {f.split("/")[0] for f in files if not f.startswith("ragline_client-")} == {
        "ragline_client"
    }
    assert "ragline_client/py.typed" in files


def test_it_imports_and_types_without_a_framework(project: Path) -> None:
    probe = (
        "import sys, ragline_client; from ragline_client import Ragline, AsyncRagline; "
        "print(sorted(n for n in ('langchain_core', 'llama_index', 'fastapi', 'api', 'core') "
        "if n in sys.modules))"
    )
    assert _run(project / "bin" / "python", "-c", probe).strip() == "[]"
    missing = subprocess.run(
        [str(project / "bin" / "python"), "-c", "import ragline_client.langchain"],
        capture_output=True,
        text=True,
    )
    assert missing.returncode != 0
    assert "pip install 'ragline-client[langchain]'" in missing.stderr
