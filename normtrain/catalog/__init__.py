"""normtrain's catalog of normalization choices, as data (``entries.py``, ``papers.py``) printed as text or as
README's Markdown tables (``render.py``) by ``normtrain-catalog`` (``cli.py``; also ``python -m normtrain.catalog``).

Plain data and the standard library: importable without torch, Hydra, W&B or datasets.
"""

from normtrain.catalog.entries import CHOICES, KINDS, Choice, Code
from normtrain.catalog.papers import Paper
from normtrain.catalog.render import markdown, text

__all__ = ["CHOICES", "KINDS", "Choice", "Code", "Paper", "markdown", "text"]
