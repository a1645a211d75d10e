"""A minimal PDF 1.4 writer: pages of Helvetica text lines, no dependency.

Enough for a report a human (and pypdf) can open: a catalog, a page tree, one content stream per page,
the standard Helvetica font (no embedding), and a cross-reference table with exact byte offsets.
"""

from __future__ import annotations

_PAGE_WIDTH = 595  # A4 in points
_PAGE_HEIGHT = 842
_MARGIN = 56
_LEADING = 16
_LINES_PER_PAGE = (_PAGE_HEIGHT - 2 * _MARGIN) // _LEADING


def _escape(text: str) -> bytes:
    """A PDF literal string body: Latin-1 (WinAnsi-ish), unknown characters as '?', delimiters escaped."""
    encoded = text.encode("latin-1", errors="replace")
    return encoded.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)").replace(b"\r", b"")


def _content(lines: list[tuple[str, int]]) -> bytes:
    out = [b"BT", f"{_MARGIN} {_PAGE_HEIGHT - _MARGIN} Td".encode(), f"{_LEADING} TL".encode()]
    current_size = 0
    for text, size in lines:
        if size != current_size:
            out.append(f"/F1 {size} Tf".encode())
            current_size = size
        out.append(b"(" + _escape(text) + b") Tj T*")
    out.append(b"ET")
    return b"\n".join(out) + b"\n"


def render_pdf(title: str, lines: list[str]) -> bytes:
    """A PDF whose first line is ``title`` (larger), followed by ``lines``, paginated as needed."""
    all_lines: list[tuple[str, int]] = [(title, 16), ("", 11)] + [(line, 11) for line in lines]
    pages = [all_lines[i : i + _LINES_PER_PAGE] for i in range(0, len(all_lines), _LINES_PER_PAGE)]
    page_count = len(pages)
    # Objects: 1 catalog, 2 page tree, 3 font, 4 info, then per page: page object, content stream.
    first_page_obj = 5
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids ["
        + b" ".join(f"{first_page_obj + 2 * i} 0 R".encode() for i in range(page_count))
        + f"] /Count {page_count} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Title (" + _escape(title) + b") /Producer (airflow-provider-loadtest simulator) >>",
    ]
    for i, page_lines in enumerate(pages):
        content_obj = first_page_obj + 2 * i + 1
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {_PAGE_WIDTH} {_PAGE_HEIGHT}] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {content_obj} 0 R >>".encode()
        )
        stream = _content(page_lines)
        objects.append(f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"endstream")

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref_at = len(out)
    out += f"xref\n0 {len(objects) + 1}\n".encode()
    out += b"0000000000 65535 f \n"
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info 4 0 R >>\n".encode()
    out += f"startxref\n{xref_at}\n%%EOF\n".encode()
    return bytes(out)
