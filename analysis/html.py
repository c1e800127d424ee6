"""report.html: the report.md we write, as one self-contained page (plots inlined as base64 PNG).

The HTML is converted from the very Markdown text of report.md, so the two can never disagree; the converter
only knows the subset our reports use (headings, paragraphs, bullet lists, pipe tables, images, **bold**,
`code`). No script, no external asset: the file reads offline and can be mailed as it is.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1400px;
       padding: 0 1.5em; color: #1d1d1f; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { margin-top: 1.8em; border-bottom: 1px solid #eee; }
table { border-collapse: collapse; margin: .8em 0; font-size: 13px; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; white-space: nowrap; }
th { background: #f3f5f7; }
td.r, th.r { text-align: right; }
tr:nth-child(even) td { background: #fafbfc; }
code { background: #f3f5f7; padding: 0 .25em; border-radius: 3px; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 14px; }
section.verdict { background: #eef6ee; border-left: 5px solid #2e7d32; padding: .2em 1em; }
"""

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")
_INLINE = re.compile(r"(`[^`]+`|\*\*[^*]+\*\*)")


def markdown_to_html(markdown: str, *, base_dir: Path, title: str) -> str:
    """The whole page; images named in the Markdown are read from ``base_dir`` and inlined."""
    body: list[str] = []
    lines = markdown.splitlines()
    i = 0
    in_verdict = False
    while i < len(lines):
        line = lines[i].rstrip()
        if not line:
            i += 1
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            text = line[level:].strip()
            if in_verdict:
                body.append("</section>")
                in_verdict = False
            slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
            if text in ("Verdict", "Recommendation", "Policy"):
                body.append('<section class="verdict">')
                in_verdict = True
            body.append(f'<h{level} id="{slug}">{_inline(text)}</h{level}>')
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            body.append(_table(block))
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            body.append("<ul>" + "".join(items) + "</ul>")
        elif (match := _IMAGE.match(line)) is not None:
            body.append(_figure(match.group("alt"), base_dir / match.group("src")))
            i += 1
        else:
            para = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|", "- ", "![")):
                para.append(lines[i].strip())
                i += 1
            body.append(f"<p>{_inline(' '.join(para))}</p>")
    if in_verdict:
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


def _inline(text: str) -> str:
    """Escape, then turn `code` and **bold** into tags (the only inline marks our reports use)."""
    out = []
    for part in _INLINE.split(text):
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        elif part.startswith("**") and part.endswith("**") and len(part) > 3:
            out.append(f"<strong>{html.escape(part[2:-2])}</strong>")
        else:
            out.append(html.escape(part))
    return "".join(out)


def _cells(row: str) -> list[str]:
    inner = row.strip()[1:-1] if row.strip().endswith("|") else row.strip()[1:]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def _table(block: list[str]) -> str:
    head = _cells(block[0])
    rule = _cells(block[1]) if len(block) > 1 else []
    right = [c.endswith(":") and not c.startswith(":") for c in rule]
    right += [False] * (len(head) - len(right))

    def row(cells: list[str], tag: str) -> str:
        return "<tr>" + "".join(
            f'<{tag}{" class=r" if r else ""}>{_inline(c)}</{tag}>' for c, r in zip(cells, right, strict=False)
        ) + "</tr>"

    body = [row(_cells(line), "td") for line in block[2:]]
    return "<table><thead>" + row(head, "th") + "</thead><tbody>" + "".join(body) + "</tbody></table>"


def _figure(alt: str, path: Path) -> str:
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError:
        return f"<p><em>(missing figure: {html.escape(path.name)})</em></p>"
    return (f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(alt)}</figcaption></figure>")


def write_html(markdown: str, out_dir: Path, *, title: str, name: str = "report.html") -> Path:
    """Write ``report.html`` beside report.md, inlining the PNGs it names from ``out_dir``."""
    path = out_dir / name
    path.write_text(markdown_to_html(markdown, base_dir=out_dir, title=title), encoding="utf-8")
    return path
