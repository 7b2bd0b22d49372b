"""Which local files an ingest sends: paths, folders and glob patterns, and their hashes."""

from __future__ import annotations

import glob
import hashlib
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

from ragline_cli.errors import UnreadableFile, UsageError
from ragline_cli.formats import SUPPORTED_EXTENSIONS, is_supported

GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class LocalFile:
    """A file to ingest: where it is, the name it is uploaded under, its shown path."""

    path: Path
    # As the user named it, or its folder's name and its path under it, or as a pattern
    # matched it.
    shown: str
    upload_name: str


@dataclass
class Selection:
    """The files an ingest sends, and those it leaves out with the reason."""

    files: list[LocalFile] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _hidden(relative: PurePosixPath) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _wanted(relative: str, include: list[str], exclude: list[str]) -> bool:
    name = PurePosixPath(relative).name
    if include and not any(fnmatch(relative, p) or fnmatch(name, p) for p in include):
        return False
    return not any(fnmatch(relative, p) or fnmatch(name, p) for p in exclude)


def _walk(folder: Path, recursive: bool) -> list[Path]:
    found = folder.rglob("*") if recursive else folder.glob("*")
    return sorted(path for path in found if path.is_file())


def _glob_root(pattern: str) -> Path:
    """The part of a pattern before its first wildcard: what shown paths are relative to."""
    parts = PurePosixPath(pattern).parts
    first = next((i for i, part in enumerate(parts) if set(part) & GLOB_CHARS), len(parts))
    return Path(*parts[:first]) if first else Path()


def select(
    arguments: list[str],
    *,
    recursive: bool,
    include: list[str],
    exclude: list[str],
    path_names: bool,
) -> Selection:
    """The files named by the arguments.

    A file is sent as given. A folder contributes its files (its whole tree with `recursive`),
    a glob pattern (`docs/**/*.md`) the files it matches; from these, hidden files and folders
    and files of types the API does not ingest are left out, with `include` / `exclude`
    patterns applied to the path under the folder and to the file name.
    """
    selection = Selection()
    seen: set[Path] = set()

    def add(path: Path, relative: str, shown: str, explicit: bool) -> None:
        resolved = path.resolve()
        if resolved in seen:
            return
        seen.add(resolved)
        if not explicit:
            if _hidden(PurePosixPath(relative)) or not _wanted(relative, include, exclude):
                return
            if not is_supported(path.name):
                selection.skipped.append((shown, "not a type Ragline ingests"))
                return
        name = relative.replace("/", "--") if path_names and not explicit else path.name
        selection.files.append(LocalFile(path, shown, name))

    for argument in arguments:
        path = Path(argument).expanduser()
        if path.is_file():
            add(path, path.name, argument, explicit=True)
        elif path.is_dir():
            for found in _walk(path, recursive):
                relative = found.relative_to(path).as_posix()
                folder = path.resolve().name or path.resolve().as_posix()
                add(found, relative, f"{folder}/{relative}", explicit=False)
        elif set(argument) & GLOB_CHARS:
            root = _glob_root(argument)
            matches = sorted(Path(m) for m in glob.glob(argument, recursive=True))
            if not matches:
                raise UsageError(f"no file matches {argument}")
            for match in matches:
                for found in [match] if match.is_file() else _walk(match, recursive):
                    add(found, found.relative_to(root).as_posix(), found.as_posix(), explicit=False)
        else:
            raise UsageError(f"no such file or folder: {argument}")
    if not selection.files:
        kinds = ", ".join(SUPPORTED_EXTENSIONS)
        raise UsageError(f"nothing to ingest in {' '.join(arguments)} (Ragline ingests {kinds})")
    _check_names(selection.files)
    return selection


def _check_names(files: list[LocalFile]) -> None:
    """Refuses two files that would be uploaded under one name: the API keeps one document per
    file name in a KB (a second one would become a new version of the first)."""
    by_name: dict[str, list[str]] = {}
    for file in files:
        by_name.setdefault(file.upload_name, []).append(file.shown)
    clashes = {name: shown for name, shown in by_name.items() if len(shown) > 1}
    if clashes:
        listed = "; ".join(f"{name}: {', '.join(shown)}" for name, shown in sorted(clashes.items()))
        raise UsageError(
            "files of the same name would replace each other as versions of one document "
            f"({listed}); pass --path-names to name each upload by its path"
        )


def sha256_of(path: Path) -> str:
    """The file's SHA-256, as the API records it."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise UnreadableFile(f"cannot read {path}: {exc.strerror}") from exc
    return digest.hexdigest()
