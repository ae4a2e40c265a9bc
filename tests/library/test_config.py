"""``TinyLMConfig`` (config.py): one config, checked when it is made."""

from __future__ import annotations

import pytest

from attention_lab import TinyLMConfig
from tests.conftest import raises


def test_a_config_checks_its_fields_when_made():
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        TinyLMConfig(d_model=30)
    with pytest.raises(ValueError, match="window=4 only applies to mask_kind='sliding'"):
        TinyLMConfig(window=4)
    with pytest.raises(TypeError, match="no field 'n_head'.*n_heads"):
        TinyLMConfig().replace(n_head=8)


# --- n_layers and the residual switch --------------------------------------------------


def test_the_residual_is_on_by_default_only_with_more_than_one_layer():
    assert TinyLMConfig().n_layers == 1 and TinyLMConfig().residual is None
    assert not TinyLMConfig().uses_residual  # the chapter's model: attention -> LM head
    assert TinyLMConfig(n_layers=2).uses_residual
    assert TinyLMConfig(n_layers=1, residual=True).uses_residual  # the one-layer control
    assert not TinyLMConfig(n_layers=3, residual=False).uses_residual
    # None is resolved when used, not when made: replace(n_layers=...) follows the new count
    assert TinyLMConfig(n_layers=2).replace(n_layers=1).uses_residual is False


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_a_bad_n_layers_is_refused_with_the_value_and_the_fix(bad):
    with raises(ValueError, f"n_layers={bad!r}", "whole number >= 1", "n_layers=2"):
        TinyLMConfig(n_layers=bad)


def test_n_layers_accepts_any_integer_kind():
    import numpy as np

    assert TinyLMConfig(n_layers=np.int64(3)).n_layers == 3
    assert type(TinyLMConfig(n_layers=np.int64(3)).n_layers) is int


@pytest.mark.parametrize("bad", [1, "yes", 0.0])
def test_residual_must_be_true_false_or_none(bad):
    with raises(ValueError, f"residual={bad!r}", "True, False or None"):
        TinyLMConfig(residual=bad)
