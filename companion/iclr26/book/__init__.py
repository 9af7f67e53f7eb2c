"""The book machinery, apart from the ML library: what a chapter records and how its Results are rendered
(:mod:`~iclr26.book.claims`: claims, controls, sanity checks, reports, glue, reading an executed notebook back;
:mod:`~iclr26.book.verdicts`: verdict rows and their rules, the Results section), the chapter manifest
(:mod:`~iclr26.book.manifest`), the command line ``python -m iclr26 list | run`` (:mod:`~iclr26.book.cli`) and the
launcher that runs a chapter's ``launch`` cells outside the notebook (``python -m iclr26.book.launch``,
:mod:`~iclr26.book.launch`). Chapters import the recording functions from ``iclr26`` itself."""

from iclr26.book import claims as _claims
from iclr26.book import verdicts as _verdicts
from iclr26.book.claims import *  # noqa: F403 (the names listed in its __all__)
from iclr26.book.verdicts import *  # noqa: F403

__all__ = [*_claims.__all__, *_verdicts.__all__]
