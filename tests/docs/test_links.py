"""No tracked file points outside the repository; every relative Markdown link resolves.

A clone holds only what git tracks, so a README link, a docs link or a code comment that
names a file beside the repository (or a notebook that is not shipped) leads nowhere for
its reader. These tests read the tracked files as a clone has them.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
import unicodedata
from functools import cache
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Names of documents that live outside the repository and must not be cited: written in
# pieces so that this file does not cite them either.
_FORBIDDEN = [
    re.compile(re.escape("DESIGN" + ".md")),
    re.compile(re.escape("CONTRACT" + ".md")),
    re.compile(re.escape("shared" + "/infrai")),
    re.compile(re.escape(".." + "/shared")),
    re.compile("DESIGN" + r"\s*" + "\u00a7"),
]
# A path that climbs with "..": checked against the repository root.
_CLIMBING_PATH = re.compile(r"(?<![\w.])((?:\.\./)+[\w.\-/]*)")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
_HTML_TARGET = re.compile(r"""<(?:a|img)\s[^>]*?(?:href|src)=["']([^"']+)["']""")
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*?(?:id|name)=["']([^"']+)["']""")
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


@cache
def tracked_files() -> tuple[str, ...]:
    """The repository's tracked files (with the working tree's content)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return tuple(path for path in listed.split("\0") if path and (ROOT / path).is_file())


def _tracked_text(suffixes: tuple[str, ...] | None = None) -> list[str]:
    paths = []
    for path in tracked_files():
        if suffixes is not None and not path.endswith(suffixes):
            continue
        try:
            (ROOT / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        paths.append(path)
    return paths


def _inside_repository(base: PurePosixPath, target: str) -> PurePosixPath | None:
    """``target`` resolved from the directory ``base`` (repository-relative), or None when
    it climbs above the repository root."""
    parts: list[str] = list(base.parts)
    for part in PurePosixPath(target).parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces → '-'."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N"))
    return kept.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor a Markdown file offers: its headings' slugs and explicit ``<a id>``."""
    found: set[str] = set(_HTML_ANCHOR.findall(markdown))
    seen: dict[str, int] = {}
    for line in _FENCE.sub("", markdown).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            slug = github_slug(match.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _anchors_of(path: PurePosixPath) -> set[str]:
    return anchors((ROOT / str(path)).read_text(encoding="utf-8"))


def link_targets(markdown: str) -> list[str]:
    """The targets of inline, reference and HTML links outside code blocks."""
    prose = _FENCE.sub("", markdown)
    return _LINK.findall(prose) + _REFERENCE_LINK.findall(prose) + _HTML_TARGET.findall(prose)


def broken_links(path: str) -> list[str]:
    """The relative links of one tracked Markdown file that lead nowhere in the repository."""
    text = (ROOT / path).read_text(encoding="utf-8")
    base = PurePosixPath(path).parent
    tracked = set(tracked_files())
    problems = []
    for target in link_targets(text):
        if _SCHEME.match(target) or target.startswith("//"):
            continue  # an absolute URL: not a path in this repository
        file_part, _, fragment = target.partition("#")
        resolved = _inside_repository(base, file_part) if file_part else PurePosixPath(path)
        if resolved is None or target.startswith("/"):
            problems.append(f"{path}: {target} points outside the repository")
            continue
        as_dir = f"{resolved}/" if str(resolved) != "." else ""
        if str(resolved) not in tracked and not any(p.startswith(as_dir) for p in tracked):
            problems.append(f"{path}: {target} is not a tracked file or folder")
            continue
        if fragment and str(resolved).endswith(".md") and fragment not in _anchors_of(resolved):
            problems.append(f"{path}: {target}: no heading or anchor #{fragment}")
    return problems


def climbing_paths(path: str, text: str, *, from_root: bool = False) -> list[str]:
    """Paths in ``text`` (found in ``path``) that climb above the repository root, read from
    the file's directory (links) or from the root (comments cite root-relative paths)."""
    base = PurePosixPath("") if from_root else PurePosixPath(path).parent
    return [
        f"{path}: {found}"
        for found in _CLIMBING_PATH.findall(text)
        if _inside_repository(base, found) is None
    ]


def forbidden_names(path: str, text: str) -> list[str]:
    """Citations of documents that are not part of the repository."""
    return [f"{path}: {match.group(0)!r}" for rule in _FORBIDDEN for match in rule.finditer(text)]


def comments_and_docstrings(source: str) -> str:
    """The comments and docstrings of a Python module, one per line."""
    pieces = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                pieces.append(docstring)
    return "\n".join(pieces)


def test_markdown_links_resolve_inside_the_repository():
    """Every relative link of every tracked Markdown file names a tracked file or folder
    inside the repository, and its #anchor exists."""
    markdown = _tracked_text((".md",))
    assert "README.md" in markdown and "docs/README.md" in markdown
    problems = [problem for path in markdown for problem in broken_links(path)]
    assert problems == []


def test_markdown_names_no_path_outside_the_repository():
    """No tracked Markdown file mentions a path that climbs out of the repository, even in
    code spans, and none cites the team's notebooks."""
    problems = []
    for path in _tracked_text((".md",)):
        text = (ROOT / path).read_text(encoding="utf-8")
        problems += climbing_paths(path, text) + forbidden_names(path, text)
    assert problems == []


def test_comments_and_docstrings_name_no_path_outside_the_repository():
    """No comment or docstring of tracked Python code points outside the repository."""
    problems = []
    for path in _tracked_text((".py",)):
        prose = comments_and_docstrings((ROOT / path).read_text(encoding="utf-8"))
        problems += climbing_paths(path, prose, from_root=True) + forbidden_names(path, prose)
    assert problems == []


def test_no_tracked_file_cites_documents_that_are_not_shipped():
    """Configuration, scripts, templates and data cite no document beside the repository."""
    problems = []
    for path in _tracked_text():
        problems += forbidden_names(path, (ROOT / path).read_text(encoding="utf-8"))
    assert problems == []


def test_every_docs_page_is_reachable_from_the_docs_index():
    """Each page under docs/ is linked from docs/README.md, so nobody writes an orphan."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    linked = {
        str(_inside_repository(PurePosixPath("docs"), target.partition("#")[0]))
        for target in link_targets(index)
        if not _SCHEME.match(target)
    }
    pages = {p for p in _tracked_text((".md",)) if p.startswith("docs/") and p != "docs/README.md"}
    assert pages - linked == set()


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("README.md", "../elsewhere/x.md", None),
        ("docs/README.md", "../README.md", "README.md"),
        ("docs/queues/infrai.md", "../http-contract.md", "docs/http-contract.md"),
        ("docs/queues/infrai.md", "../../../x", None),
    ],
)
def test_relative_paths_are_judged_from_their_file(source, target, expected):
    """A path is resolved from the directory of the file that holds it."""
    resolved = _inside_repository(PurePosixPath(source).parent, target)
    assert (None if resolved is None else str(resolved)) == expected


def test_the_checks_catch_what_they_are_for():
    """A climbing path, a notebook citation and a missing anchor are each reported."""
    assert climbing_paths("README.md", "see ../away/notes") == ["README.md: ../away/notes"]
    assert climbing_paths("docs/a.md", "see ../README.md") == []
    assert climbing_paths("app/x.py", "see ../notes", from_root=True) == ["app/x.py: ../notes"]
    assert forbidden_names("a.py", "# as " + "DESIGN" + " \u00a78 says")
    assert forbidden_names("a.md", "CONTRACT" + ".md")
    assert github_slug("Operator API (`Bearer ADMIN_TOKEN`)") == "operator-api-bearer-admin_token"
    assert "the-push-request" in anchors("## The push request\n")
    assert "x" in anchors('<a id="x"></a>')
    assert link_targets("```\n[a](../nowhere)\n```\n[b](docs/x.md#y)") == ["docs/x.md#y"]
    source = '"""Module, see ../outside/file."""\nx = "../not/a/comment"  # ../in/comment\n'
    assert set(climbing_paths("m.py", comments_and_docstrings(source), from_root=True)) == {
        "m.py: ../outside/file.",
        "m.py: ../in/comment",
    }
