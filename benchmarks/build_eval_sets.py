"""Builds the quality benchmark's evaluation sets (`benchmarks/eval/*.json`) from real documents.

    .venv/bin/python -m benchmarks.build_eval_sets [--manpages ../shared/eval/manpages.json]
                                                   [--check]

Needs the Debian packages `debian-policy` and `debian-reference-en` (apt) and the man-page
corpus `../shared/eval/manpages.json`. Deterministic: the same inputs and `SEED` give the same
files byte for byte. The Debian FAQ (`debian-faq`) is deliberately not used: it is kept for a
held-out check.

Multi-format set (`eval/multiformat.json`)
  Documents: the Debian Policy Manual as its HTML chapter and appendix files, as plain text
  (`policy.txt.gz`) and as PDF (`policy.pdf.gz`); the Debian Reference as its HTML chapter,
  preface and appendix files, as plain text and as PDF. `.gz` files are uploaded decompressed.
  Two knowledge bases are described: `all_formats` (every document, so each passage is there
  three times) and `one_copy` (the HTML files alone, each passage once).
  Sections: every numbered heading (h1-h6) of the HTML files starts a section that runs to the
  next numbered heading; its own text (navigation, tables of contents and permalinks dropped)
  is the relevant passage.
  Queries: a section's title with its numbering removed, as it stands in the manual. A title
  qualifies when it has at least `MIN_TITLE_WORDS` words of which `MIN_CONTENT_WORDS` are not
  stop words (shorter titles, "Sections", "Version 4.6.2", do not identify one section), no
  other section of either manual has the same title, the section's own text has at least
  `MIN_SECTION_WORDS` words, and no 1,200-character window of the manuals' text outside the
  section reaches half the judge's threshold against it (`AMBIGUOUS`), so that the judge
  cannot take a hit from elsewhere for it (this drops sections quoted elsewhere, e.g. in the
  Policy's upgrading checklist, and near-identical sibling sections). `PER_MANUAL`
  qualifying titles per manual are sampled (one random stream per manual, seeded from `SEED`).
  Relevance: a hit from any document of the KB is relevant when its text shares at least
  `judging.PASSAGE_THRESHOLD` (40%) of the smaller of it and the section text, in character
  shingles of their letters and digits or in runs of three words (`benchmarks/judging.py` says
  why both). The section texts are stored in the file.
  `--check` extracts and chunks every document with the pipeline's own extractors and reports
  how many sampled sections have a relevant chunk in each format, and how many HTML chunks are
  judged relevant to a section of another file (a check of the judge, not a filter).

Exact-term set (`eval/exact_terms.json`)
  Corpus: the man-page benchmark's 1,481 pages (`manpages.json`: the first 200 words of each
  page body), which the quality benchmark ingests anyway.
  Identifiers: long option flags with an inner hyphen (`--dereference-args`), file paths of two
  or more components (`/etc/gai.conf`), upper-case names with an underscore (environment
  variables and constants, `SSH_ORIGINAL_COMMAND`) and CamelCase names (configuration keys and
  names, `MemoryAccounting`), as they occur in the pages. One qualifies only if it occurs, as a
  whole token and ignoring case, in exactly one page of the corpus, and is not a placeholder
  (`/path/to/...`, `foo`). `PER_KIND` per kind are sampled (one random stream
  per kind, seeded from `SEED`).
  Queries: each identifier twice, bare, and inside one generic question drawn from that kind's
  `TEMPLATES` ("what does --foo do") by the same stream.
  Relevance: a hit of the identifier's page whose text contains the identifier as a whole token.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import hashlib
import json
import random
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup, XMLParsedAsHTMLWarning
from bs4.element import NavigableString, Tag

from benchmarks.judging import (
    PASSAGE_THRESHOLD,
    RUN_WORDS,
    SHINGLE_CHARS,
    Fingerprint,
    identifier_pattern,
)

SEED = 8
OUT = Path(__file__).parent / "eval"
MANPAGES = Path("../shared/eval/manpages.json")
DEBIAN_PACKAGES = ("debian-policy", "debian-reference-en")
POLICY = Path("/usr/share/doc/debian-policy")
REFERENCE = Path("/usr/share/doc/debian-reference-en/docs")

MIN_TITLE_WORDS = 3
MIN_CONTENT_WORDS = 2
MIN_SECTION_WORDS = 50
# A typical hit: the pipeline's default chunk size.
WINDOW_CHARS = 1200
WINDOW_STEP = 600
AMBIGUOUS = PASSAGE_THRESHOLD / 2
PER_MANUAL = 75
PER_KIND = 25

STOP_WORDS = frozenset(
    "a about an and are as at be by can do does for from how i in into is it its of on or "
    "the their this to use using via vs what when which who why with your".split()
)
# Numbered headings: "4.9.1. debian/rules", "Chapter 2. Debian package management", "A.3. ...".
NUMBERED = re.compile(r"^(?:(?:Chapter|Appendix)\s+)?([0-9A-Z]+(?:\.[0-9]+)*)\.?\s+(\S.*)$")
# Page furniture that is not part of any section's text.
FURNITURE = frozenset(
    {
        "related", "sphinxsidebar", "footer", "navheader", "navfooter", "toc",
        "list-of-tables", "list-of-figures", "headerlink",
    }
)  # fmt: skip

KINDS = {
    "option": r"--[a-z0-9]+(?:-[a-z0-9]+)+",
    "path": r"(?:/[\w+-][\w.+-]*){2,}",
    "variable": r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+",
    "name": r"[A-Z][a-z]+(?:[A-Z][a-z0-9]*)+",
}
PLACEHOLDERS = re.compile(
    r"path|/to/|foo|bar|baz|example|xx|\.\.\.|/some/|/your/|/my/", re.IGNORECASE
)
MIN_IDENTIFIER_CHARS = 6
TEMPLATES = {
    "option": ("what does {} do", "what is the {} option for", "when should I use {}"),
    "path": ("what is {} for", "what is stored in {}", "which program reads {}"),
    "variable": ("what does {} mean", "what is {} used for", "how is {} set"),
    "name": ("what is {}", "what does {} do", "what is {} used for"),
}


@dataclass(frozen=True)
class Source:
    """One document of the multi-format KB."""

    path: Path
    manual: str
    format: str

    @property
    def upload_name(self) -> str:
        """The file name it is uploaded as (`.gz` files are uploaded decompressed)."""
        return self.path.name.removesuffix(".gz")

    def read(self) -> bytes:
        """The bytes to upload."""
        data = self.path.read_bytes()
        return gzip.decompress(data) if self.path.suffix == ".gz" else data


@dataclass(frozen=True)
class Section:
    """A numbered section of a manual's HTML, with its own text."""

    manual: str
    file: str
    number: str
    title: str
    text: str

    @property
    def key(self) -> str:
        """A stable id: manual, file and section number."""
        return f"{self.manual}/{self.file}#{self.number}"


def policy_html() -> list[Path]:
    """The Policy Manual's chapter and appendix files, with the upgrading checklist."""
    folder = POLICY / "policy.html"
    return [
        *sorted(folder.glob("ch-*.html")),
        *sorted(folder.glob("ap-*.html")),
        folder / "upgrading-checklist.html",
    ]


def reference_html() -> list[Path]:
    """The Debian Reference's preface, chapter and appendix files."""
    return [
        REFERENCE / "pr01.en.html",
        *sorted(REFERENCE.glob("ch*.en.html")),
        REFERENCE / "apa.en.html",
    ]


def multiformat_sources() -> list[Source]:
    """Every document of the multi-format KB, manual by manual."""
    return [
        *(Source(path, "debian-policy", "html") for path in policy_html()),
        Source(POLICY / "policy.txt.gz", "debian-policy", "txt"),
        Source(POLICY / "policy.pdf.gz", "debian-policy", "pdf"),
        *(Source(path, "debian-reference", "html") for path in reference_html()),
        Source(REFERENCE / "debian-reference.en.txt.gz", "debian-reference", "txt"),
        Source(REFERENCE / "debian-reference.en.pdf", "debian-reference", "pdf"),
    ]


def missing_documents(paths: list[Path]) -> str | None:
    """A message naming the apt packages to install if any document is missing, else None."""
    missing = [str(path) for path in paths if not path.is_file()]
    if not missing:
        return None
    return (
        f"{len(missing)} Debian document(s) missing (first: {missing[0]}); install them with "
        f"`apt-get install {' '.join(DEBIAN_PACKAGES)}`"
    )


def html_sections(path: Path, manual: str) -> list[Section]:
    """The numbered sections of an HTML file, each with the text up to the next one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)
        soup = BeautifulSoup(path.read_text(encoding="utf-8"), "lxml")
    for tag in soup.find_all(["script", "style", "head"]):
        tag.decompose()
    for tag in soup.find_all(True):
        if not tag.decomposed and FURNITURE & set(tag.get("class") or []):
            tag.decompose()
    headings: list[tuple[str, str]] = []
    for tag in soup.find_all(re.compile(r"^h[1-6]$")):
        assert isinstance(tag, Tag)
        title = " ".join(tag.get_text("").replace("\N{PILCROW SIGN}", "").split())
        match = NUMBERED.match(title)
        if match is None:
            continue  # "Tip", "Note", "Navigation": part of the text around them
        # A marker no document contains, to split the text at the headings afterwards.
        tag.replace_with(NavigableString(f"\n\x00{len(headings)}\x00\n"))
        headings.append((match.group(1), match.group(2)))
    root = soup.body or soup
    parts = re.split(r"\x00(\d+)\x00", root.get_text(" "))
    return [
        Section(
            manual,
            path.name,
            headings[int(parts[i])][0],
            headings[int(parts[i])][1],
            " ".join(parts[i + 1].split()),
        )
        for i in range(1, len(parts), 2)
    ]


def title_words(title: str) -> tuple[int, int]:
    """How many words a title has, and how many of them are not stop words."""
    words = [word.strip(".,:;()\"'") for word in re.findall(r"[^\s]+", title)]
    words = [word for word in words if any(char.isalnum() for char in word)]
    content = [w for w in words if w.casefold() not in STOP_WORDS and len(w) >= 3]
    return len(words), len(content)


def qualifying_sections(files: list[list[Section]]) -> tuple[list[Section], dict[str, int]]:
    """The sections whose title can be a known-item query, and why the others were dropped."""
    sections = [section for file in files for section in file]
    titles = collections.Counter(section.title.casefold() for section in sections)
    dropped: collections.Counter[str] = collections.Counter()
    candidates = []
    for section in sections:
        words, content = title_words(section.title)
        if words < MIN_TITLE_WORDS or content < MIN_CONTENT_WORDS:
            dropped["title too short or generic"] += 1
        elif titles[section.title.casefold()] > 1:
            dropped["title not unique"] += 1
        elif len(section.text.split()) < MIN_SECTION_WORDS:
            dropped["too little own text"] += 1
        else:
            candidates.append(section)
    foreign = foreign_similarity(files, candidates)
    kept = []
    for section in candidates:
        if foreign[section.key] >= AMBIGUOUS:
            dropped["text like another part of the manuals"] += 1
        else:
            kept.append(section)
    return kept, dict(dropped)


def foreign_similarity(files: list[list[Section]], candidates: list[Section]) -> dict[str, float]:
    """For each candidate, the judge's highest similarity between it and a window of the
    manuals' text (`WINDOW_CHARS`, every `WINDOW_STEP`) that holds none of it."""
    prints = {section.key: Fingerprint.of(section.text) for section in candidates}
    gram_holders: dict[str, set[str]] = collections.defaultdict(set)
    run_holders: dict[tuple[str, ...], set[str]] = collections.defaultdict(set)
    for key, fingerprint in prints.items():
        for gram in fingerprint.grams:
            gram_holders[gram].add(key)
        for run in fingerprint.runs:
            run_holders[run].add(key)
    worst = dict.fromkeys(prints, 0.0)
    for file in files:
        text = ""
        spans = []
        for section in file:
            spans.append((len(text), len(text) + len(section.text), section.key))
            text += section.text + " "
        for start in range(0, max(1, len(text) - WINDOW_STEP), WINDOW_STEP):
            end = start + WINDOW_CHARS
            inside = {key for first, last, key in spans if first < end and last > start}
            window = Fingerprint.of(text[start:end])
            grams: collections.Counter[str] = collections.Counter()
            runs: collections.Counter[str] = collections.Counter()
            for gram in window.grams:
                grams.update(gram_holders.get(gram, ()))
            for run in window.runs:
                runs.update(run_holders.get(run, ()))
            for key in (grams.keys() | runs.keys()) - inside:
                other = prints[key]
                similarity = max(
                    grams[key] / min(len(window.grams), len(other.grams)),
                    runs[key] / min(len(window.runs), len(other.runs)) if window.runs else 0.0,
                )
                worst[key] = max(worst[key], similarity)
    return worst


def sampler(stratum: str) -> random.Random:
    """The random draws of one manual or kind: its own seed, so the others do not shift it."""
    return random.Random(f"{SEED}:{stratum}")


def sha256(path: Path) -> str:
    """The file's SHA-256, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_versions(
    packages: Sequence[str] = DEBIAN_PACKAGES, status: Path = Path("/var/lib/dpkg/status")
) -> dict[str, str]:
    """The installed versions of the Debian packages the documents come from."""
    versions = {}
    for stanza in status.read_text(encoding="utf-8").split("\n\n"):
        fields = dict(re.findall(r"^(Package|Version): (.+)$", stanza, re.MULTILINE))
        if fields.get("Package") in packages and "Version" in fields:
            versions[fields["Package"]] = fields["Version"]
    return dict(sorted(versions.items()))


def build_multiformat() -> dict[str, Any]:
    """The multi-format set: documents, the two KBs, sections and queries."""
    sources = multiformat_sources()
    files = [
        html_sections(source.path, source.manual) for source in sources if source.format == "html"
    ]
    sections = [section for file in files for section in file]
    eligible, dropped = qualifying_sections(files)
    sampled: list[Section] = []
    for manual in ("debian-policy", "debian-reference"):
        pool = [section for section in eligible if section.manual == manual]
        sampled.extend(sampler(manual).sample(pool, min(PER_MANUAL, len(pool))))
    order = {section.key: position for position, section in enumerate(sections)}
    sampled.sort(key=lambda section: order[section.key])
    names = [source.upload_name for source in sources]
    assert len(set(names)) == len(names), "upload names must differ (same name = new version)"
    return {
        "description": "Known-item queries from section titles of two Debian manuals, each "
        "present as HTML, plain text and PDF; relevance by passage overlap.",
        "seed": SEED,
        "judge": {
            "shingle_chars": SHINGLE_CHARS,
            "run_words": RUN_WORDS,
            "threshold": PASSAGE_THRESHOLD,
        },
        "packages": package_versions(),
        "documents": [
            {
                "path": str(source.path),
                "upload_name": source.upload_name,
                "manual": source.manual,
                "format": source.format,
                "sha256": sha256(source.path),
            }
            for source in sources
        ],
        "kbs": {
            "all_formats": [str(source.path) for source in sources],
            "one_copy": [str(source.path) for source in sources if source.format == "html"],
        },
        "counts": {
            "sections": len(sections),
            "qualifying": dict(collections.Counter(section.manual for section in eligible)),
            "dropped": dropped,
        },
        "sections": {
            section.key: {
                "manual": section.manual,
                "file": section.file,
                "number": section.number,
                "title": section.title,
                "text": section.text,
            }
            for section in sampled
        },
        "queries": {
            f"mf-{position:03d}": {"text": section.title, "section": section.key}
            for position, section in enumerate(sampled, start=1)
        },
    }


def identifier_candidates(corpus: dict[str, str]) -> dict[str, dict[str, str]]:
    """Kind -> identifier (as first written) -> its page, for identifiers in exactly one page."""
    found: dict[str, dict[str, str]] = {}
    folded = {page: text.casefold() for page, text in corpus.items()}
    for kind, expression in KINDS.items():
        pattern = re.compile(rf"(?<![\w/.-]){expression}(?![\w-])")
        spelling: dict[str, str] = {}
        for page in sorted(corpus):
            for match in pattern.finditer(corpus[page]):
                identifier = match.group(0).rstrip(".")
                if len(identifier) >= MIN_IDENTIFIER_CHARS and not PLACEHOLDERS.search(identifier):
                    spelling.setdefault(identifier.casefold(), identifier)
        unique: dict[str, str] = {}
        for identifier in sorted(spelling.values()):
            matcher = identifier_pattern(identifier)
            pages = [
                page
                for page, text in folded.items()
                if identifier.casefold() in text and matcher.search(corpus[page])
            ]
            if len(pages) == 1:
                unique[identifier] = pages[0]
        found[kind] = unique
    return found


def build_exact_terms(manpages: Path) -> dict[str, Any]:
    """The exact-term set: identifiers found in exactly one man page, two queries each."""
    corpus: dict[str, str] = json.loads(manpages.read_text())["corpus"]
    candidates = identifier_candidates(corpus)
    identifiers: dict[str, dict[str, str]] = {}
    queries: dict[str, dict[str, str]] = {}
    for kind, unique in candidates.items():
        rng = sampler(kind)
        for identifier in sorted(rng.sample(sorted(unique), min(PER_KIND, len(unique)))):
            key = f"id-{len(identifiers) + 1:03d}"
            identifiers[key] = {"identifier": identifier, "kind": kind, "page": unique[identifier]}
            queries[f"{key}-bare"] = {"text": identifier, "identifier": key, "style": "bare"}
            question = rng.choice(TEMPLATES[kind]).format(identifier)
            queries[f"{key}-words"] = {"text": question, "identifier": key, "style": "words"}
    return {
        "description": "Identifiers that occur in exactly one of the man-page benchmark's "
        "pages, queried bare and inside a generic question; relevant: the hit of that page "
        "whose text contains the identifier.",
        "seed": SEED,
        "corpus": {"path": str(manpages), "sha256": sha256(manpages), "pages": len(corpus)},
        "counts": {kind: len(unique) for kind, unique in candidates.items()},
        "identifiers": identifiers,
        "queries": queries,
    }


def check_judge(data: dict[str, Any]) -> None:
    """Chunks every document as the pipeline does and reports, per format, how many sampled
    sections have a chunk the judge finds relevant, and how many chunks of the HTML files are
    found relevant to a section of another file (which would be wrong)."""
    from infra.settings.ingest import ChunkingSettings
    from workers.chunk.chunking import chunk_document
    from workers.extract.extractors import extract

    sections = data["sections"]
    prints = {key: Fingerprint.of(section["text"]) for key, section in sections.items()}
    chunking = ChunkingSettings()
    covered: dict[str, set[str]] = collections.defaultdict(set)
    elsewhere = 0
    for document in data["documents"]:
        source = Source(Path(document["path"]), document["manual"], document["format"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            extracted = extract(source.read(), source.upload_name)
        chunks, _ = chunk_document(
            extracted, chunking.chunk_size_chars, chunking.chunk_overlap_chars
        )
        label = f"{source.manual} {source.format}"
        for chunk in chunks:
            fingerprint = Fingerprint.of(chunk.text)
            for key, passage in prints.items():
                if sections[key]["manual"] != source.manual:
                    continue
                if passage.similarity(fingerprint) >= PASSAGE_THRESHOLD:
                    covered[label].add(key)
                    if source.format == "html" and sections[key]["file"] != source.upload_name:
                        elsewhere += 1
    for label in sorted(covered):
        manual = label.split()[0]
        total = sum(1 for section in sections.values() if section["manual"] == manual)
        print(f"judge check: {label}: {len(covered[label])} of {total} sections have a chunk")
    print(f"judge check: HTML chunks judged relevant to a section of another file: {elsewhere}")


def write(path: Path, data: dict[str, Any]) -> None:
    """Writes a set as stable, diff-friendly JSON."""
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    """Builds both sets and writes them under `benchmarks/eval/`."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.build_eval_sets")
    parser.add_argument("--manpages", type=Path, default=MANPAGES)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="report the judge's coverage")
    args = parser.parse_args()
    problem = missing_documents([source.path for source in multiformat_sources()])
    if problem:
        sys.exit(problem)
    if not args.manpages.is_file():
        sys.exit(f"{args.manpages} not found (the man-page benchmark corpus)")
    args.out.mkdir(parents=True, exist_ok=True)

    multiformat = build_multiformat()
    write(args.out / "multiformat.json", multiformat)
    print(
        f"multiformat: {len(multiformat['documents'])} documents, "
        f"{multiformat['counts']['sections']} sections, "
        f"qualifying {multiformat['counts']['qualifying']}, {len(multiformat['queries'])} queries; "
        f"dropped {multiformat['counts']['dropped']}"
    )
    exact = build_exact_terms(args.manpages)
    write(args.out / "exact_terms.json", exact)
    print(
        f"exact_terms: {len(exact['identifiers'])} identifiers of {exact['counts']} unique, "
        f"{len(exact['queries'])} queries"
    )
    if args.check:
        check_judge(multiformat)


if __name__ == "__main__":
    main()
