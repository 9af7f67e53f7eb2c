"""One figure style for the whole book: seaborn's whitegrid, a colour-blind palette, crisp inline figures.

Call :func:`use_style` once at the top of a chapter. Figures then look the same in the HTML book and on Colab.
"""

from __future__ import annotations

from iclr26.validate import as_float

__all__ = ["use_style", "PALETTE", "savefig"]

PALETTE = "colorblind"


def use_style(context: str = "notebook", font_scale: float = 1.0) -> None:
    """Apply the book's style: seaborn ``whitegrid`` + ``colorblind`` palette, 110-dpi figures, retina inline output."""
    import matplotlib as mpl
    import seaborn as sns

    if context not in ("paper", "notebook", "talk", "poster"):
        raise ValueError(f"context must be one of 'paper', 'notebook', 'talk', 'poster', got {context!r}")
    font_scale = as_float(font_scale, "font_scale", 0.0, low_open=True)
    sns.set_theme(context=context, style="whitegrid", palette=PALETTE, font_scale=font_scale)
    mpl.rcParams.update(
        {
            "figure.dpi": 110,
            "savefig.dpi": 150,
            "figure.figsize": (6.4, 4.0),
            "figure.constrained_layout.use": True,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titleweight": "bold",
            "legend.frameon": False,
            "image.cmap": "viridis",
        }
    )
    _inline_in_notebooks()


def _inline_in_notebooks() -> None:
    """In a Jupyter kernel, draw figures inline whatever MPLBACKEND says (Agg would show nothing)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return
    shell.run_line_magic("matplotlib", "inline")
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("png")


def savefig(fig, path, **kwargs) -> None:
    """Save a figure with the book's defaults (tight bounding box)."""
    from pathlib import Path

    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    if not callable(getattr(fig, "savefig", None)):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    kwargs.setdefault("bbox_inches", "tight")
    fig.savefig(path, **kwargs)
