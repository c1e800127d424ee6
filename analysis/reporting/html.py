"""report.html: the report.md we write, as one self-contained page (plots inlined as base64 PNG).

The HTML is converted from the very Markdown text of report.md, so the two can never disagree; the converter
only knows the subset our reports use (headings, paragraphs, bullet lists, pipe tables, images, **bold**,
`code`, backslash escapes). No script, no external asset: the file reads offline and can be mailed as it is.

Only the images the report itself wrote are inlined (``images``: plain file names), and only from inside the
report's own directory: an image line naming anything else (an absolute path, ``..``, a link that leads out of
the directory) is shown as text and its file is never read. Report text from a server is escaped where it is
written (``contract.servertext.markdown_text``), so it cannot form an image line; this check holds even if it did.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Collection
from pathlib import Path

from specbench.analysis.reporting.files import write_whole

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
# A backslash-escaped punctuation mark, a `code` span or a **bold** run (which may hold escapes).
_INLINE = re.compile(r"\\(?P<escaped>[!-/:-@\[-`{-~])|`(?P<code>[^`]+)`|\*\*(?P<bold>(?:\\.|[^*\\])+)\*\*")
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.png")


def markdown_to_html(markdown: str, *, base_dir: Path, title: str, images: Collection[str] = ()) -> str:
    """The whole page; of the images named in the Markdown, those in ``images`` are read from ``base_dir``
    and inlined."""
    allowed = frozenset(images)
    body: list[str] = []
    boxed = False
    for kind, block in _blocks(markdown.splitlines()):
        if kind == "heading":
            if boxed:
                body.append("</section>")
            boxed = _heading_text(block[0]) in BOXED
            body.append(('<section class="verdict">' if boxed else "") + _heading(block[0]))
        else:
            body.append(_image(block, base_dir, allowed) if kind == "image" else RENDER[kind](block, base_dir))
    if boxed:
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


BOXED = ("Verdict", "Recommendation", "Policy")


def _kind(line: str) -> str:
    if line.startswith("#"):
        return "heading"
    if line.startswith("|"):
        return "table"
    if line.startswith("- "):
        return "list"
    if _IMAGE.match(line.rstrip()):
        return "image"
    return "para"


def _blocks(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Consecutive lines of one kind, blank lines ending a block; headings and images stand alone."""
    blocks: list[tuple[str, list[str]]] = []
    for raw in lines:
        line = raw.rstrip()
        if not line:
            blocks.append(("blank", []))
            continue
        kind = _kind(line)
        if blocks and blocks[-1][0] == kind and kind not in ("heading", "image"):
            blocks[-1][1].append(line)
        else:
            blocks.append((kind, [line]))
    return [(k, b) for k, b in blocks if k != "blank"]


def _heading_text(line: str) -> str:
    return line.lstrip("#").strip()


def _heading(line: str) -> str:
    level = len(line) - len(line.lstrip("#"))
    text = _heading_text(line)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return f'<h{level} id="{slug}">{_inline(text)}</h{level}>'


def _list(block: list[str], _: Path) -> str:
    return "<ul>" + "".join(f"<li>{_inline(line[2:])}</li>" for line in block) + "</ul>"


def _para(block: list[str], _: Path) -> str:
    return f"<p>{_inline(' '.join(line.strip() for line in block))}</p>"


def _image(block: list[str], base_dir: Path, allowed: frozenset[str]) -> str:
    match = _IMAGE.match(block[0])
    assert match is not None
    path = own_image(base_dir, match.group("src"), allowed)
    if path is None:
        return _para(block, base_dir)
    return _figure(match.group("alt"), path)


def own_image(base_dir: Path, src: str, allowed: frozenset[str]) -> Path | None:
    """The file an image line may inline: a plain ``.png`` name the report wrote, inside ``base_dir`` once every
    link is followed; None for anything else (absolute, ``..``, another directory, a link leading out)."""
    if src not in allowed or not _FILE_NAME.fullmatch(src):
        return None
    root = base_dir.resolve()
    path = (root / src).resolve()
    return path if path.parent == root else None


def _inline(text: str) -> str:
    """Escape, then turn `code` and **bold** into tags (the only inline marks our reports use); a
    backslash-escaped mark is that mark as text."""
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos:match.start()]))
        if match.group("escaped") is not None:
            out.append(html.escape(match.group("escaped")))
        elif match.group("code") is not None:
            out.append(f"<code>{html.escape(match.group('code'))}</code>")
        else:
            out.append(f"<strong>{_inline(match.group('bold'))}</strong>")
        pos = match.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _cells(row: str) -> list[str]:
    inner = row.strip()[1:-1] if row.strip().endswith("|") else row.strip()[1:]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def _table(block: list[str], _: Path | None = None) -> str:
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


RENDER = {"table": _table, "list": _list, "para": _para}


def write_html(markdown: str, out_dir: Path, *, title: str, images: Collection[Path] = (),
               name: str = "report.html") -> Path:
    """Write ``report.html`` beside report.md, inlining the PNGs the report wrote (``images``) from ``out_dir``."""
    names = [p.name for p in images if p.parent.resolve() == out_dir.resolve()]
    return write_whole(out_dir / name, markdown_to_html(markdown, base_dir=out_dir, title=title, images=names))
