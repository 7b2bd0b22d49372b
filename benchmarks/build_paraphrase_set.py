"""Builds the paraphrased-question set (`benchmarks/eval/paraphrase.json`) from hand-written
questions and the installed Debian manuals.

    .venv/bin/python -m benchmarks.build_paraphrase_set [--check FILE.jsonl ...]

Needs the Debian packages in `PACKAGES` (`make benchmark-documents` installs them).
Deterministic: the same sources and package versions give the same file byte for byte.

Why: the other sets ask in the documents' own words (section titles, a man page's own
description). People and agents ask in theirs. This set asks the way a user does.

Sources (`benchmarks/eval/paraphrase/<manual>.jsonl`), one question a line, written by reading
the manual: `{"id", "question", "answers": [{"manual", "quote"}]}`.

- `question`: what a user who has not read the manual would ask (not a heading, not a sentence
  of the text turned round), at least `MIN_QUESTION_WORDS` words. Rule, checked here: it
  shares no run of `RUN` or more content words (stop words left out, stemmed, as the sparse
  retriever reads words: `core.sparse.content_words`) with any of its answer quotes.
- `answers`: each a verbatim quote (whitespace aside) of the passage that answers the question,
  `MIN_QUOTE_CHARS` to `MAX_QUOTE_CHARS` characters, from the manual's reference text
  (`Manual.reference`): where a second manual answers too, its passage is listed as well, and
  a hit overlapping any of them counts. Checked here: every quote is found in its manual.

Documents of the KB the questions are asked in: every manual as its package installs it
(`Manual.documents`), in the formats users upload:
- the Debian Reference and the Debian Policy Manual: HTML chapters, plain text and PDF (the
  multi-format set's 41 files);
- the Python 3.11 tutorial and FAQ: HTML pages and their reStructuredText sources (`*.rst.txt`);
- the GNU Bash Reference Manual: one HTML page and its PDF (quotes are checked against its Info
  text);
- twelve of Git's guides and command pages: HTML and their AsciiDoc sources (`*.txt`);
- fifteen of SQLite's articles on how it behaves: HTML (quotes are checked against their
  visible text).

Split: by corpus, never question by question (`PARTS`): the three manuals the search constants
were first tuned on are `tune`; Bash, Git and SQLite, added later, are `test`. Constants of the
search service are chosen on `tune` only (across its corpora: `benchmarks/quality.py`); `test` is
what is reported.

Relevance (`benchmarks/quality.py`): a hit is relevant when it shares at least
`judging.PASSAGE_THRESHOLD` of the smaller of its text and an answer quote
(`judging.Passage`), so any chunking and any format can be judged.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup

from benchmarks.build_eval_sets import package_versions, sha256
from core.sparse import content_words

OUT = Path(__file__).parent / "eval" / "paraphrase.json"
SOURCES = Path(__file__).parent / "eval" / "paraphrase"
PACKAGES = (
    "debian-policy",
    "debian-reference-en",
    "python3.11-doc",
    "bash-doc",
    "git-doc",
    "sqlite3-doc",
)
RUN = 3
MIN_QUESTION_WORDS = 4
MIN_QUOTE_CHARS = 60
MAX_QUOTE_CHARS = 1200
SPACE = re.compile(r"\s+")
# Which part each corpus is in: whole corpora, never question by question, so no document has
# questions in both. The three manuals the search constants were first tuned on are the tuning
# part; the three added later, never looked at while tuning, are the test part.
PARTS = {
    "reference": "tune",
    "policy": "tune",
    "python": "tune",
    "bash": "test",
    "git": "test",
    "sqlite": "test",
}

REFERENCE_DIR = Path("/usr/share/debian-reference")
POLICY_DIR = Path("/usr/share/doc/debian-policy")
PYTHON_DIR = Path("/usr/share/doc/python3.11/html")
PYTHON_PARTS = ("tutorial", "faq")
BASH_DIR = Path("/usr/share/doc/bash")
BASH_INFO = Path("/usr/share/info/bash.info.gz")
GIT_DIR = Path("/usr/share/doc/git-doc")
# Git's guides and the pages of the commands they lean on; each is installed as AsciiDoc
# source (`.txt`, no `include::` among these) and as the HTML built from it.
GIT_PAGES = (
    "user-manual",
    "gittutorial",
    "gittutorial-2",
    "giteveryday",
    "gitfaq",
    "gitworkflows",
    "gitcore-tutorial",
    "gitcli",
    "gitcredentials",
    "gitsubmodules",
    "gitignore",
    "git-bisect",
)
SQLITE_DIR = Path("/usr/share/doc/sqlite3")
# SQLite's articles on how it behaves (not its syntax pages, which are mostly diagrams).
SQLITE_PAGES = (
    "faq",
    "datatype3",
    "wal",
    "foreignkeys",
    "autoinc",
    "quirks",
    "whentouse",
    "lang_transaction",
    "isolation",
    "limits",
    "lang_vacuum",
    "howtocorrupt",
    "atomiccommit",
    "lang_conflict",
    "threadsafe",
)


@dataclass(frozen=True)
class Manual:
    """A manual: the text quotes are checked against, and the documents uploaded."""

    name: str
    package: str
    reference: list[Path]
    documents: list[tuple[Path, str]]

    def text(self) -> str:
        """The reference text, whitespace collapsed."""
        return SPACE.sub(" ", " ".join(read_text(path) for path in self.reference))


def read_text(path: Path) -> str:
    """A file's text (`.gz` decompressed; an HTML page's visible text)."""
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
    if path.suffix != ".html":
        return text
    soup = BeautifulSoup(text, "lxml")
    for tag in soup.find_all(["script", "style", "head"]):
        tag.decompose()
    return (soup.body or soup).get_text(" ")


def manuals() -> dict[str, Manual]:
    """The manuals, with their documents as this machine has them."""
    reference_html = sorted(REFERENCE_DIR.glob("*.en.html"))
    policy_html = sorted(
        p
        for p in (POLICY_DIR / "policy.html").glob("*.html")
        if p.name not in ("genindex.html", "search.html")
    )
    python_html = sorted(p for part in PYTHON_PARTS for p in (PYTHON_DIR / part).glob("*.html"))
    python_rst = sorted(
        p for part in PYTHON_PARTS for p in (PYTHON_DIR / "_sources" / part).glob("*.rst.txt")
    )
    reference_text = REFERENCE_DIR / "debian-reference.en.txt.gz"
    policy_text = POLICY_DIR / "policy.txt.gz"
    git_text = [GIT_DIR / f"{page}.txt" for page in GIT_PAGES]
    sqlite_html = [SQLITE_DIR / f"{page}.html" for page in SQLITE_PAGES]
    return {
        "reference": Manual(
            "reference",
            "debian-reference-en",
            [reference_text],
            [(p, "html") for p in reference_html]
            + [(reference_text, "text"), (REFERENCE_DIR / "debian-reference.en.pdf", "pdf")],
        ),
        "policy": Manual(
            "policy",
            "debian-policy",
            [policy_text],
            [(p, "html") for p in policy_html]
            + [(policy_text, "text"), (POLICY_DIR / "policy.pdf.gz", "pdf")],
        ),
        "python": Manual(
            "python",
            "python3.11-doc",
            python_rst,
            [(p, "html") for p in python_html] + [(p, "text") for p in python_rst],
        ),
        "bash": Manual(
            "bash",
            "bash-doc",
            [BASH_INFO],
            [(BASH_DIR / "bashref.html", "html"), (BASH_DIR / "bashref.pdf", "pdf")],
        ),
        "git": Manual(
            "git",
            "git-doc",
            git_text,
            [(GIT_DIR / f"{page}.html", "html") for page in GIT_PAGES]
            + [(p, "text") for p in git_text],
        ),
        "sqlite": Manual(
            "sqlite",
            "sqlite3-doc",
            sqlite_html,
            [(p, "html") for p in sqlite_html],
        ),
    }


def shared_run(question: str, passage: str, size: int = RUN) -> tuple[str, ...] | None:
    """A run of `size` content words the question shares with the passage, if any."""
    words = content_words(question)
    runs = {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}
    if not runs:
        return None
    theirs = content_words(passage)
    for i in range(len(theirs) - size + 1):
        run = tuple(theirs[i : i + size])
        if run in runs:
            return run
    return None


def problems(entry: dict[str, Any], texts: dict[str, str]) -> list[str]:
    """What is wrong with one source question (nothing: it qualifies)."""
    found = []
    question = str(entry.get("question", ""))
    if len(question.split()) < MIN_QUESTION_WORDS:
        found.append(f"question has fewer than {MIN_QUESTION_WORDS} words")
    answers = entry.get("answers") or []
    if not answers:
        found.append("no answers")
    for answer in answers:
        manual, quote = answer.get("manual"), SPACE.sub(" ", str(answer.get("quote", ""))).strip()
        if manual not in texts:
            found.append(f"unknown manual {manual!r}")
            continue
        if not MIN_QUOTE_CHARS <= len(quote) <= MAX_QUOTE_CHARS:
            found.append(
                f"quote of {len(quote)} characters (want {MIN_QUOTE_CHARS}-{MAX_QUOTE_CHARS})"
            )
        if quote not in texts[manual]:
            found.append(f"quote not found verbatim in {manual}: {quote[:60]!r}...")
        run = shared_run(question, quote)
        if run is not None:
            found.append(f"shares the content-word run {' '.join(run)!r} with its answer")
    return found


def read_sources(paths: list[Path]) -> list[dict[str, Any]]:
    """The source questions of the files, in order."""
    entries = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                entry = json.loads(line)
                entry["_where"] = f"{path.name}:{number}"
                entries.append(entry)
    return entries


def split_of(entries: list[dict[str, Any]]) -> dict[str, str]:
    """`tune` or `test` per question id: its corpus's part (`PARTS`)."""
    return {entry["id"]: PARTS[corpus_of(entry)] for entry in entries}


def corpus_of(entry: dict[str, Any]) -> str:
    """The corpus a question is asked of: its first answer's manual."""
    return str(entry["answers"][0]["manual"])


def unique_names(paths: list[Path]) -> dict[Path, str]:
    """The name each file is uploaded under: its own (without `.gz`), or, where two share it,
    prefixed by its folder's (`tutorial-index.html`): a KB takes a file of a name it already
    holds as a new version of that document."""
    plain = {path: path.name.removesuffix(".gz") for path in paths}
    shared = {name for name in plain.values() if list(plain.values()).count(name) > 1}
    return {
        path: f"{path.parent.name}-{name}" if name in shared else name
        for path, name in plain.items()
    }


def build(entries: list[dict[str, Any]], books: dict[str, Manual]) -> dict[str, Any]:
    """The set file's content."""
    splits = split_of(entries)
    upload_names = unique_names([path for book in books.values() for path, _ in book.documents])
    return {
        "description": "paraphrased questions; see benchmarks/build_paraphrase_set.py",
        "judge": "an answer quote and a hit share judging.PASSAGE_THRESHOLD of the smaller",
        "packages": package_versions(PACKAGES),
        "documents": [
            {
                "path": str(path),
                "upload_name": upload_names[path],
                "manual": book.name,
                "format": form,
                "sha256": sha256(path),
            }
            for book in books.values()
            for path, form in book.documents
        ],
        "questions": {
            entry["id"]: {
                "text": entry["question"],
                "corpus": corpus_of(entry),
                "split": splits[entry["id"]],
                "answers": [
                    {"manual": a["manual"], "text": SPACE.sub(" ", a["quote"]).strip()}
                    for a in entry["answers"]
                ],
            }
            for entry in entries
        },
    }


def main() -> None:
    """Checks the sources (all, or the files given) and, when all are checked, writes the set."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.build_paraphrase_set")
    parser.add_argument("--check", nargs="+", type=Path, help="only check these source files")
    args = parser.parse_args()
    books = manuals()
    missing = [str(p) for b in books.values() for p, _ in b.documents if not p.is_file()]
    if missing:
        sys.exit(
            f"build_paraphrase_set: {len(missing)} document(s) missing (first: {missing[0]}); "
            "run `make benchmark-documents`"
        )
    texts = {name: book.text() for name, book in books.items()}
    paths = args.check or sorted(SOURCES.glob("*.jsonl"))
    entries = read_sources(paths)
    bad = 0
    seen: set[str] = set()
    for entry in entries:
        found = problems(entry, texts)
        if entry.get("id") in seen:
            found.append("duplicate id")
        seen.add(entry.get("id", ""))
        for problem in found:
            print(f"{entry['_where']} {entry.get('id')}: {problem}")
        bad += bool(found)
    print(f"{len(entries)} questions, {bad} with problems")
    if bad:
        sys.exit(1)
    if args.check:
        return
    content = build(entries, books)
    OUT.write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(
        f"wrote {OUT}: {len(content['questions'])} questions, {len(content['documents'])} documents"
    )


if __name__ == "__main__":
    main()
