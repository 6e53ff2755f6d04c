"""A PNG of a `dpmstream report` page as Chromium renders it (the picture in the README).

    .venv/bin/python scripts/report-screenshot.py out/t20.html docs/report-thesis.png

Needs Debian's chromium (`make install-system`) and Pillow (the `test` extra).
"""

from __future__ import annotations

import argparse
import io
import os

from PIL import Image

from dpmstream.report.chromium import Chromium


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("page", help="the report's HTML file")
    p.add_argument("png", help="the screenshot to write")
    p.add_argument("--width", type=int, default=1100, help="window width in CSS pixels")
    args = p.parse_args()
    with Chromium() as browser:
        page = browser.open("file://" + os.path.abspath(args.page), width=args.width)
        problems = page.console_errors
        png = page.screenshot()
    if problems:
        raise SystemExit(f"report-screenshot: the page logged errors: {problems}")
    image = Image.open(io.BytesIO(png)).convert("RGB")   # no alpha: smaller, same look
    image.save(args.png, optimize=True)
    print(f"wrote {args.png} ({image.width}x{image.height})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
