"""The pages the docs promise exist: each command's `--help` page, and every relative link.

What it is: a check of the repository's Markdown against its files, reading nothing but text.
What it is not: the check that the command lines in the docs parse (that belongs to the tests of
the product as used).
Invariant: a page named by a command's `--help`, or linked from README.md or a page under docs/,
is a file in the checkout.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nanobench.commands import COMMANDS
from nanobench.sweep.command import SWEEP

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A Markdown link's target, skipping web addresses and in-page anchors.
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)")


@pytest.mark.parametrize("c", [*COMMANDS, SWEEP], ids=lambda c: c.name)
def test_each_commands_help_page_exists(c):
    assert c.doc, f"{c.name} names no page under docs/"
    assert (ROOT / c.doc).is_file(), f"{c.name} --help links {c.doc}, which does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    targets = LINK.findall(page.read_text())
    missing = [t for t in targets if not (page.parent / t).is_file()]
    assert not missing, f"{page.relative_to(ROOT)} links missing files: {missing}"


def test_readme_links_every_docs_page():
    linked = set(LINK.findall((ROOT / "README.md").read_text()))
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages, "no pages under docs/"
    assert pages <= linked, f"README.md does not link {sorted(pages - linked)}"
