import nbformat
import pytest
from nbclient import NotebookClient

from iclr26.plot import savefig, use_style


@pytest.mark.kernel
def test_figures_render_inline_even_with_agg_backend(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")  # as a Makefile or CI environment might set it
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\nfrom iclr26.plot import use_style\nuse_style()\n"
            "plt.plot([0, 1], [1, 0])\nplt.show()"
        )
    ]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    assert any("image/png" in out.get("data", {}) for out in nb.cells[0].outputs)


def test_use_style_and_savefig_bad_input(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with pytest.raises(ValueError, match="context"):
        use_style(context="billboard")
    with pytest.raises(ValueError, match="font_scale"):
        use_style(font_scale=0)
    use_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    savefig(fig, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
    with pytest.raises(TypeError, match="path"):
        savefig(fig, 3)
    plt.close(fig)
