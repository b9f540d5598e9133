"""The documentation served with the site: /staff/help/<doc> renders docs/<DOC>.md.

An alarm links to its row of ALARMS.md (alarms/links.py: /staff/help/alarms#sensor-range), so
the help is one click away on the site itself, whatever version it runs, with no internet.
Rendered with markdown-it-py (CommonMark and tables; raw HTML in the docs is escaped). Headings
get GitHub's anchors, so the docs' own `#links` work here as on GitHub; each row of a table
whose first cell names alarm keys (`sensor-range:<sensor id>`) gets an anchor per key kind;
links to another doc (`INGEST.md#limits`) point at its page here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token

from core.pages import staff_page

# Only these names: a doc name never becomes a path of the person's choosing.
DOC_NAME = re.compile(r"[a-z_]{1,40}")
KEY_KIND = re.compile(r"^([a-z][a-z0-9-]*)(?::|$)")
DOC_LINK = re.compile(r"^([A-Z_]+)\.md(#[\w-]*)?$")


def docs_dir() -> Path:
    return Path(settings.BASE_DIR) / "docs"


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def _anchor_tokens(tokens: list[Token]) -> None:
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            token.attrSet("id", slug(tokens[index + 1].content))
        elif token.type == "tr_open" and tokens[index + 1].type == "td_open":
            cell = tokens[index + 2]
            kinds = []
            for child in cell.children or []:
                match = KEY_KIND.match(child.content) if child.type == "code_inline" else None
                if match and match.group(1) not in kinds:
                    kinds.append(match.group(1))
            if kinds:
                token.attrSet("id", kinds[0])
                token.attrSet("class", "alarm-kind")
            for extra in kinds[1:]:  # a row of two kinds (`node-input-errors`, `gateway-...`)
                anchor = Token("html_inline", "", 0)
                anchor.content = f'<span id="{extra}"></span>'
                cell.children.insert(0, anchor)
        elif token.type == "inline":
            for child in token.children or []:
                href = child.attrGet("href") if child.type == "link_open" else None
                match = DOC_LINK.match(str(href)) if href else None
                if match:
                    child.attrSet(
                        "href", f"/staff/help/{match.group(1).lower()}{match.group(2) or ''}"
                    )


@lru_cache(maxsize=32)
def _rendered(path: Path, mtime_ns: int) -> str:
    """The doc as HTML; cached per file version (mtime), so an edited doc shows at once."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(path.read_text(encoding="utf-8"))
    _anchor_tokens(tokens)
    return md.renderer.render(tokens, md.options, {})


def rendered(name: str) -> str:
    """The HTML of docs/<NAME>.md; Http404 for a name that is not a doc."""
    if not DOC_NAME.fullmatch(name):
        raise Http404("no such help page")
    path = docs_dir() / f"{name.upper()}.md"
    if not path.is_file():
        raise Http404("no such help page")
    return _rendered(path, path.stat().st_mtime_ns)


@staff_page
def help_page(request: HttpRequest, name: str) -> HttpResponse:
    html = rendered(name)
    return render(
        request,
        "staff/help.html",
        {"nav": "help", "doc_html": mark_safe(html), "doc_name": name.upper()},
    )
