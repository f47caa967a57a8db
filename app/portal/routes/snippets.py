"""The "verify your webhooks" panel's code, one short function per language, read once from
app/portal/snippets/ (tests run the Node and Python ones against a real delivery)."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parents[1] / "snippets"
_LANGUAGES = (("node", "Node.js"), ("python", "Python"), ("go", "Go"), ("ruby", "Ruby"))

# name -> (what the panel calls it, the code)
SNIPPETS = {name: (label, (_HERE / f"{name}.txt").read_text()) for name, label in _LANGUAGES}
