#!/usr/bin/env python3
"""Replaces one "## TITLE" section of docs/benchmarks.md (up to the next "## " heading), or appends it,
leaving every other section as it is. Each benchmark writes only its own section through this.

Usage: doc_section.py DOC TITLE BODY_FILE   (or import replace_section)
"""
import os
import re
import sys

HEADER = "# Benchmarks\n\nRecorded by `make bench` (bench/run-all). Each section says how to reproduce it.\n"


def replace_section(doc_path, title, body):
    text = open(doc_path).read() if os.path.exists(doc_path) else HEADER
    section = f"## {title}\n\n{body.strip()}\n\n"
    pattern = re.compile(rf"^## {re.escape(title)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    os.makedirs(os.path.dirname(os.path.abspath(doc_path)), exist_ok=True)
    with open(doc_path, "w") as f:
        f.write(text.rstrip("\n") + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    replace_section(sys.argv[1], sys.argv[2], open(sys.argv[3]).read())
