"""MkDocs hook: the Configuration page's reference of every setting, from the settings model.

`<!-- generated: settings -->` on a page becomes one table per group of settings: each
setting's name, environment variable, type, default, constraints and description (the field's
`description`, else the comment above it in the source; a setting of a nested model, such as a
stage's `max_attempts`, is followed by the description of the field holding that model), read
from the model when the site is built, so the page cannot drift from the code. Defaults are the
model's, not the environment's.

Every page is also checked: a `RAGLINE_...` variable it names must be a setting (or a group of
them), else the build warns (and `mkdocs build --strict` fails).
"""

from __future__ import annotations

import ast
import inspect
import logging
import re
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

try:
    from docs.hooks.markdown_tables import table_rows
except ModuleNotFoundError:  # MkDocs loads a hook from its file, with docs/hooks on sys.path
    from markdown_tables import table_rows  # type: ignore[import-not-found,no-redef]

log = logging.getLogger("mkdocs.hooks.settings_page")

MARKER = "<!-- generated: settings -->"
VARIABLE = re.compile(r"\bRAGLINE_[A-Z0-9_]*[A-Z0-9]")
# Variables of other programs than the service's processes: the CLI's and the test suite's.
NOT_SETTINGS = frozenset({"RAGLINE_URL", "RAGLINE_TOKEN", "RAGLINE_TEST_SERVERS"})


def settings_model() -> type[BaseModel]:
    """The settings model every process builds (the one place it is imported)."""
    from infra.settings import Settings

    return Settings


@dataclass(frozen=True)
class Setting:
    """One leaf setting of the model."""

    path: tuple[str, ...]
    env: str
    type: str
    default: str
    constraints: str
    description: str
    described: bool


@dataclass(frozen=True)
class Group:
    """The settings of one nested model (`kafka`), or the model's own (`path` empty)."""

    path: tuple[str, ...]
    env: str
    doc: str
    settings: list[Setting]


def env_naming(model: type[BaseModel]) -> tuple[str, str]:
    """The model's environment prefix and nesting delimiter."""
    config: Any = model.model_config
    return str(config.get("env_prefix", "")), str(config.get("env_nested_delimiter") or "__")


def groups(model: type[BaseModel] | None = None) -> list[Group]:
    """Every setting of the model, by group: its own fields first, then each nested model's
    (nested models within those, such as each stage's policy, stay in their group)."""
    model = model or settings_model()
    prefix, delimiter = env_naming(model)
    instance = model.model_construct()  # the defaults, without reading the environment
    found = [Group((), prefix.rstrip("_"), _doc(model), [])]
    for name, field in model.model_fields.items():
        value = getattr(instance, name)
        if isinstance(value, BaseModel):
            env = f"{prefix}{name}".upper()
            group = Group((name,), env, _doc(type(value)), [])
            _collect(type(value), value, (name,), env, delimiter, "", group.settings)
            found.append(group)
        else:
            found[0].settings.append(_setting(model, name, field, value, (name,), prefix, ""))
    return found


def _collect(
    model: type[BaseModel],
    instance: BaseModel,
    path: tuple[str, ...],
    env: str,
    delimiter: str,
    inherited: str,
    into: list[Setting],
) -> None:
    for name, field in model.model_fields.items():
        value = getattr(instance, name)
        if isinstance(value, BaseModel):
            about = _description(model, name, field) or inherited
            _collect(
                type(value),
                value,
                (*path, name),
                f"{env}{delimiter}{name.upper()}",
                delimiter,
                about,
                into,
            )
        else:
            into.append(
                _setting(model, name, field, value, (*path, name), f"{env}{delimiter}", inherited)
            )


def _setting(
    model: type[BaseModel],
    name: str,
    field: FieldInfo,
    value: Any,
    path: tuple[str, ...],
    env_prefix: str,
    inherited: str,
) -> Setting:
    own = _description(model, name, field)
    return Setting(
        path=path,
        env=f"{env_prefix}{name}".upper(),
        type=_type(field.annotation),
        default=_default(value),
        constraints=_constraints(field),
        description=" ".join(part for part in (own, inherited) if part),
        described=bool(own),
    )


def _description(model: type[BaseModel], name: str, field: FieldInfo) -> str:
    """The field's description, else the comment lines right above its line in the source."""
    if field.description:
        return " ".join(field.description.split())
    return _comments(model).get(name, "")


_COMMENTS: dict[type[BaseModel], dict[str, str]] = {}


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """Each field of a model class and the comment right above it (the lines starting with `#`
    between it and the previous statement)."""
    if model not in _COMMENTS:
        lines, _ = inspect.getsourcelines(model)
        tree = ast.parse("".join(lines))
        found: dict[str, str] = {}
        body = tree.body[0]
        assert isinstance(body, ast.ClassDef)
        for statement in body.body:
            if not (
                isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
            ):
                continue
            above: list[str] = []
            number = statement.lineno - 2  # the line above, 0-based
            while number >= 0 and lines[number].strip().startswith("#"):
                above.insert(0, lines[number].strip().lstrip("#").strip())
                number -= 1
            if above:
                found[statement.target.id] = " ".join(above)
        _COMMENTS[model] = found
    return _COMMENTS[model]


def _doc(model: type[BaseModel]) -> str:
    return " ".join((inspect.getdoc(model) or "").split())


def _type(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " or ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, UnionType):
        arguments = [a for a in get_args(annotation) if a is not NoneType]
        shown = " or ".join(_type(a) for a in arguments)
        return f"{shown} (optional)" if len(arguments) < len(get_args(annotation)) else shown
    if origin is list:
        (item,) = get_args(annotation)
        return f"list of {_type(item)} (JSON)"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        return "empty" if not value.get_secret_value() else "(a secret)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str) and not value:
        return "empty"
    if isinstance(value, list):
        import json

        return f"`{json.dumps(value)}`"
    return f"`{value}`"


_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _constraints(field: FieldInfo) -> str:
    shown = []
    for item in field.metadata:
        for attribute, sign in _BOUNDS:
            bound = getattr(item, attribute, None)
            if bound is not None:
                shown.append(f"{sign} {bound}")
    return ", ".join(shown)


def render(model: type[BaseModel] | None = None) -> str:
    """The reference: one section and table per group."""
    parts = []
    for group in groups(model):
        title = "General" if not group.path else f"`{'.'.join(group.path)}`"
        parts.append(f"### {title}")
        if group.doc:
            parts.append(group.doc)
        rows = [
            "| setting | environment variable | type | default | constraints | description |",
            "|---|---|---|---|---|---|",
        ]
        for setting in group.settings:
            cells = (
                f"`{'.'.join(setting.path)}`",
                f"`{setting.env}`",
                setting.type,
                setting.default,
                setting.constraints,
                setting.description,
            )
            rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        parts.append("\n".join(rows))
    return "\n\n".join(parts) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def variable_names(model: type[BaseModel] | None = None) -> set[str]:
    """Every environment variable of the model: each setting's, and each group's prefix
    (`RAGLINE_KAFKA`, `RAGLINE_STAGES__EXTRACT`)."""
    names = set()
    delimiter = env_naming(model or settings_model())[1]
    for group in groups(model):
        names.add(group.env)
        for setting in group.settings:
            names.add(setting.env)
            parts = setting.env.split(delimiter)
            names.update(delimiter.join(parts[:n]) for n in range(1, len(parts)))
    return names


def undescribed(model: type[BaseModel] | None = None) -> list[str]:
    """The settings with neither a description nor a comment of their own."""
    return [
        ".".join(setting.path)
        for group in groups(model)
        for setting in group.settings
        if not setting.described
    ]


def unknown_variables(markdown: str, known: set[str]) -> list[str]:
    """The `RAGLINE_...` names a page uses that are no setting of the model."""
    return sorted({name for name in VARIABLE.findall(markdown) if name not in known | NOT_SETTINGS})


_TOKEN = re.compile(r"`[^`]*`|\d{1,3}(?:,\d{3})+(?:\.\d+)?|[^,/]+")


def table_problems(markdown: str, model: type[BaseModel] | None = None) -> list[str]:
    """What a hand-written `| variable | default | ... |` table says that the model does not:
    a variable that is no setting (`__X` after a variable is its group's `X`), or a default,
    written in backticks or as a number, that is not the model's."""
    defaults = {
        setting.env: setting.default.strip("`")
        for group in groups(model)
        for setting in group.settings
    }
    problems: list[str] = []
    for cells in table_rows(markdown, "| variable | default |"):
        names = _names(cells[0])
        if not names:
            continue
        tokens = [t.strip() for t in _TOKEN.findall(cells[1]) if t.strip()]
        values = [t for t in tokens if t.startswith("`") or _is_number(t)]
        problems.extend(f"{name} is no setting" for name in names if name not in defaults)
        if len(values) != len(tokens) or len(values) != len(names):
            continue  # prose ("generated by `make run`", "2 MB"): not checked
        for name, value in zip(names, values, strict=True):
            actual = defaults.get(name)
            if actual is not None and not _same(value.strip("`"), actual):
                problems.append(f"{name}: the table says {value}, the model {actual!r}")
    return problems


def _names(cell: str) -> list[str]:
    names: list[str] = []
    for written in re.findall(r"`([^`]+)`", cell):
        if "<" in written:
            return []
        if written.startswith("__") and names:
            written = names[-1].rsplit("__", 1)[0] + written
        names.append(written)
    return names


def _is_number(text: str) -> bool:
    return re.fullmatch(r"\d[\d,]*(?:\.\d+)?", text) is not None


def _same(written: str, actual: str) -> bool:
    try:
        return float(written.replace(",", "")) == float(actual)
    except ValueError:
        return written == actual


# -- MkDocs events --------------------------------------------------------------------------------


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the marker, and warns of settings' variables that do not exist."""
    for name in unknown_variables(markdown, variable_names()):
        log.warning("%s names %s, which is no setting", page.file.src_uri, name)
    for problem in table_problems(markdown):
        log.warning("%s: %s", page.file.src_uri, problem)
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, render())
    return markdown


if __name__ == "__main__":
    print("\n".join(undescribed()))
