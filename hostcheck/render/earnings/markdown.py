"""The earnings report's terminal lines as Markdown."""

from __future__ import annotations


def as_markdown(lines: list[str]) -> str:
    """Terminal lines as Markdown: headings and tables set apart by blank lines, the chart kept
    in its code block, every other line a list item (so lines never run together)."""
    out: list[str] = []
    in_code = in_table = False
    seen_heading = False

    def blank() -> None:
        if out and out[-1] != "":
            out.append("")

    for line in lines:
        if line == "```":
            if not in_code:
                blank()
            out.append(line)
            in_code = not in_code
            if not in_code:
                out.append("")
            continue
        if in_code:
            out.append(line)
            continue
        if line.startswith("|"):
            if not in_table:
                blank()
            in_table = True
            out.append(line)
            continue
        if in_table:
            in_table = False
            out.append("")
        if not line.strip():
            continue
        if line.startswith("#"):
            blank()
            out += [line, ""]
            seen_heading = seen_heading or line.startswith("## ")
        elif not seen_heading:
            out += [line, ""]  # the headline: a paragraph of its own
        else:
            out.append(f"- {line.strip()}")
    return "\n".join(out).rstrip()
