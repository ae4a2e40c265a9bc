"""The package namespace (attention_lab/__init__.py): ``import attention_lab`` stays light (no
matplotlib, seaborn, ipywidgets, tqdm.auto), the plotting names load on first use, and an
unknown name is an AttributeError that names it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# (torch itself imports plain tqdm; tqdm.auto is the notebook flavour, which pulls in IPython)
HEAVY = ("matplotlib", "seaborn", "pandas", "ipywidgets", "tqdm.auto", "IPython")


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_core_loads_no_plotting_or_widget_library():
    code = textwrap.dedent(
        f"""
        import sys
        import attention_lab
        from attention_lab import TinyLM, MultiHeadSelfAttention, train_tiny_lm
        loaded = [m for m in {HEAVY!r} if m in sys.modules]
        print(",".join(loaded))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"import attention_lab loaded {result.stdout.strip()}"


@pytest.mark.slow  # a fresh interpreter
def test_plotting_names_still_come_from_the_package_on_first_use():
    code = "import attention_lab as al, sys; al.plot_heads; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_an_unknown_attribute_is_an_attribute_error_that_names_it():
    import attention_lab

    with pytest.raises(AttributeError, match="plot_haeds"):
        attention_lab.plot_haeds  # noqa: B018
