"""The quality benchmark's smallest set, `fixtures`: questions over the test fixtures, which every
clone has (the other sets need the man-page corpus or Debian packages).

Documents: four files of `tests/fixtures` (a typeset service handbook, a one-page PDF, a
19-page data-model PDF and a short DOCX), uploaded as they are. Questions: written for this
set in a user's words, each with a verbatim quote of the passage that answers it (from
`service-handbook.tex`, `crazyones.txt` and the data model's text); a hit is relevant when it
shares `judging.PASSAGE_THRESHOLD` of the smaller of its text and the quote
(`judging.Passage`), as in the paraphrase set. Eight questions: enough to run every step of the
benchmark in seconds, far too few to compare configurations with.
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
DOCUMENTS = (
    "service-handbook.pdf",
    "crazyones.pdf",
    "GeoBase_NHNC1_Data_Model_UML_EN.pdf",
    "blk-paras-and-tables.docx",
)
# id: (question, the quote that answers it)
QUESTIONS: dict[str, tuple[str, str]] = {
    "returns": (
        "How many days does a customer have to send a purchase back?",
        "Customers may return any product within thirty days of delivery, provided that it is "
        "complete and undamaged.",
    ),
    "refund-time": (
        "How soon does the money come back once the parcel was checked?",
        "Refunds are issued to the original payment method within five working days after the "
        "warehouse has inspected the parcel.",
    ),
    "water": (
        "Is a flooded router from the outdoor line repaired under guarantee?",
        "Water damage is covered for twenty four months on every outdoor router of the XJ series.",
    ),
    "escalate": (
        "when should a support agent hand a case over to specialists",
        "An agent escalates a conversation to the second level when the customer has contacted "
        "support three times about the same problem",
    ),
    "recordings": (
        "how long is the audio of phone calls kept",
        "Recordings of telephone calls are kept for ninety days and then deleted automatically",
    ),
    "saturday": (
        "Can I phone support on a Saturday afternoon?",
        "from eight in the morning until eight in the evening on working days and from ten until "
        "four on Saturdays",
    ),
    "tools": (
        "Who does the company build its products for?",
        "We make tools for these kinds of people.",
    ),
    "renamed": (
        "Which metadata field got a new name in the 2004 edition of the hydro model?",
        "The object metadata attribute « date » is renamed « validity_date »",
    ),
}


def documents() -> list[Path]:
    """The set's files."""
    return [FIXTURES / name for name in DOCUMENTS]
