"""Every relative link in ``docs/`` and the README resolves, and ``docs/README.md`` indexes every page.

The docs are sorted in four sections (docs/README.md): use/, model/, extend/, studies/. A page moved
between sections breaks the links to it; this test names each broken one (file, line, target).
"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
SECTIONS = ("use", "model", "extend", "studies")


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md")) + [REPO / "README.md"]


def _broken(page: Path, root: Path = REPO) -> list[str]:
    """Relative link targets of ``page`` that do not exist, as ``file:line: target`` (``file`` relative to ``root``)."""
    out = []
    in_code = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for target in LINK.findall(line):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path):
                continue
            if not (page.parent / path).exists():
                out.append(f"{page.relative_to(root)}:{number}: {target}")
    return out


def test_every_relative_link_in_docs_and_readme_resolves():
    broken = [b for page in _pages() for b in _broken(page)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](nowhere.md#x) [web](https://example.org)\n```\n[code](skipped.md)\n```\n")
    assert [b.split(": ")[-1] for b in _broken(page, root=tmp_path)] == ["nowhere.md#x"]


def test_docs_are_sorted_in_four_sections_and_indexed():
    loose = [p.name for p in DOCS.glob("*.md") if p.name != "README.md"]
    assert not loose, f"pages outside the sections {SECTIONS}: {loose}"
    assert {p.name for p in DOCS.iterdir() if p.is_dir()} >= set(SECTIONS)
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    missing = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
               if p.name != "README.md" and f"({p.relative_to(DOCS).as_posix()})" not in index]
    assert not missing, f"docs/README.md does not index: {missing}"
