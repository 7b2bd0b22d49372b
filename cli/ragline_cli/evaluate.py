"""`ragline eval CASES.jsonl --kb KB`: a knowledge base's retrieval evaluation and its misses."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from ragline_cli import output
from ragline_cli.answers import as_json, config_label, config_settings
from ragline_cli.context import JsonFlag, KbOption, client_of
from ragline_cli.errors import ApiError, ExitCode, UsageError
from ragline_client import APIStatusError, InvalidRequestError
from ragline_client.models import Applied, ConfigResult, Evaluation


def read_cases(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """The cases of a JSON Lines file (`{"query": …, "expected": […]}` a line; blank lines
    ignored) and the line each came from."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    cases: list[dict[str, Any]] = []
    lines: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            case = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(case, dict):
            raise UsageError(f'{path}:{number}: a case is an object {{"query", "expected"}}')
        if isinstance(case.get("expected"), str):
            case["expected"] = [case["expected"]]
        cases.append(case)
        lines.append(number)
    if not cases:
        raise UsageError(f"{path} holds no cases")
    return cases, lines


def _locate(error: InvalidRequestError, path: Path, lines: list[int]) -> ApiError:
    """The API's error with `cases.N` pointing at the file's line."""

    def at_line(match: re.Match[str]) -> str:
        index = int(match.group(1))
        where = f" ({path}:{lines[index]})" if index < len(lines) else ""
        return f"{match.group(0)}{where}"

    return ApiError(error.status_code, re.sub(r"cases\.(\d+)", at_line, error.detail))


def _figures(result: ConfigResult) -> list[str]:
    scores = result.scores
    return [
        f"{value:.3f}"
        for value in (scores.recall_at_k, scores.recall_at_10, scores.mrr, scores.ndcg_at_10)
    ]


def _show(evaluation: Evaluation, kb_label: str, misses_of: str) -> None:
    best = evaluation.best
    output.say(
        f"evaluation {evaluation.id} of {kb_label}: {evaluation.case_count} cases, "
        f"k = {evaluation.k}",
        style="bold",
    )
    rows = []
    for result in evaluation.tried or list(evaluation.modes.values()):
        chosen = config_label(result.config) == config_label(best)
        label = Text(config_label(result.config) + (" ← best" if chosen else ""))
        if chosen:
            label.stylize("bold green")
        rows.append((label, *_figures(result)))
    columns = ("Configuration", f"recall@{evaluation.k}", "recall@10", "MRR", "nDCG@10")
    output.show(output.table(None, columns, rows))
    output.say(
        f"a bot should use {config_label(best)} "
        f"(nDCG@10 {evaluation.best_scores.ndcg_at_10:.3f}): knowledge.{config_settings(best)}"
    )
    _show_gain(evaluation)
    mode = evaluation.modes.get(misses_of)
    if mode is None:
        output.warn(f"no results for mode {misses_of!r}: {', '.join(evaluation.modes)}")
        return
    misses = mode.misses or []
    if not misses:
        output.say(f"no misses with {config_label(mode.config)}", style="green")
        return
    output.say(
        f"misses with {config_label(mode.config)} "
        f"({len(misses)} of {evaluation.case_count} cases):",
        style="bold",
    )
    console = output.stdout()
    for miss in misses:
        console.print(Text(f"• {miss.query}", style="bold"))
        console.print(Text("  missing: " + "; ".join(output.truncate(m, 80) for m in miss.missing),
                           style="red"))  # fmt: skip
        for rank, hit in enumerate(miss.returned, 1):
            console.print(
                Text(
                    f"  {rank}. {hit.score:.3f} {hit.document_title}: "
                    + output.truncate(hit.text, 100),
                    style="dim",
                )
            )


def _show_gain(evaluation: Evaluation) -> None:
    """Whether the best is a significant gain over what the KB's searches used: applying it
    (--apply, the console) is offered only then."""
    gain = evaluation.gain
    if gain is None:
        output.warn("this evaluation keeps no per-case figures: run it again to compare")
        return
    cases = gain.wins + gain.losses + gain.ties
    told = (
        f"against {config_label(gain.over)}, what the knowledge base's searches used: nDCG@10 "
        f"{gain.difference:+.3f}, better in {gain.wins}, worse in {gain.losses} of {cases} "
        f"cases, p = {gain.p_value:.3f}: "
    )
    if evaluation.offered:
        output.say(told + "a significant gain; --apply puts it to use", style="green")
    elif config_label(evaluation.best) == config_label(gain.over):
        output.say(told + "the best is the current configuration")
    else:
        output.say(
            told + "not a significant gain (that takes p < 0.05); keep the current configuration"
        )


def apply_target(value: str) -> dict[str, Any]:
    """The apply body of `--apply`: `kb` (the KB's default retrieval) or `bot:<bot_id>`."""
    if value == "kb":
        return {"target": "kb"}
    kind, _, bot_id = value.partition(":")
    if kind == "bot" and bot_id.strip():
        return {"target": "bot", "bot_id": bot_id.strip()}
    raise UsageError(f"--apply takes kb or bot:<bot_id>, not {value!r}")


def _show_applied(applied: Applied) -> None:
    target = (
        "the knowledge base's default retrieval"
        if applied.target == "kb"
        else f"bot {applied.bot_id}'s knowledge settings"
    )
    before = config_label(applied.before) if applied.before else "none (the service's default)"
    output.say(
        f"applied {config_label(applied.config)} to {target}: before {before}, "
        f"now {config_label(applied.after)}",
        style="green",
    )


def evaluate(
    ctx: typer.Context,
    cases_file: Annotated[
        Path,
        typer.Argument(help='JSON Lines: {"query": "…", "expected": ["doc_… or a snippet"]}.'),
    ],
    kb: KbOption,
    k: Annotated[int, typer.Option(min=1, max=10, help="The k of recall@k (a bot's top_k).")] = 4,
    misses: Annotated[
        str | None,
        typer.Option(help="Show this mode's misses (default: the best's).", show_default=False),
    ] = None,
    fail_under: Annotated[
        float | None,
        typer.Option(
            min=0, max=1, help="Exit 1 if the best nDCG@10 is under this.", show_default=False
        ),
    ] = None,
    apply: Annotated[
        str | None,
        typer.Option(
            "--apply",
            metavar="kb|bot:BOT_ID",
            help="Then apply the best configuration: as the KB's default retrieval (kb) or to "
            "a bot with the KB attached (bot:BOT_ID); only when it is a significant gain over "
            "the target's current configuration (the API refuses and says why otherwise), and "
            "not when the best is under --fail-under.",
            show_default=False,
        ),
    ] = None,
    json_out: JsonFlag = False,
) -> None:
    """Evaluate a knowledge base's retrieval on your questions: recall, MRR and nDCG per mode,
    the best configuration for a bot, and the questions it misses; with --apply, put the best
    to use."""
    target = None if apply is None else apply_target(apply)
    cases, lines = read_cases(cases_file)
    client = client_of(ctx)
    try:
        evaluation = client.evaluate(kb, {"cases": cases, "k": k})
    except InvalidRequestError as error:
        raise _locate(error, cases_file, lines) from None
    under = fail_under is not None and evaluation.best_scores.ndcg_at_10 < fail_under
    applied: Applied | None = None
    refused: APIStatusError | None = None
    if target is not None and not under:
        try:
            applied = client.apply_evaluation(kb, evaluation.id, target)
        except APIStatusError as error:
            refused = error
    if json_out:
        answer = as_json(evaluation)
        if target is not None:
            answer["applied"] = None if applied is None else as_json(applied)
        output.print_json(answer)
    else:
        _show(evaluation, kb, misses or evaluation.best.retrieval_mode)
        if applied is not None:
            _show_applied(applied)
    if refused is not None:
        raise refused
    if under:
        if not json_out:
            output.say(
                f"nDCG@10 {evaluation.best_scores.ndcg_at_10:.3f} is under {fail_under:g}"
                + ("; nothing applied" if target is not None else ""),
                style="red",
            )
        raise typer.Exit(int(ExitCode.FAILED))
