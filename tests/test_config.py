"""``TinyLMConfig`` (config.py): one config, checked when it is made."""

from __future__ import annotations

import pytest

from attention_lab import TinyLMConfig


def test_a_config_checks_its_fields_when_made():
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        TinyLMConfig(d_model=30)
    with pytest.raises(ValueError, match="window=4 only applies to mask_kind='sliding'"):
        TinyLMConfig(window=4)
    with pytest.raises(TypeError, match="no field 'n_head'.*n_heads"):
        TinyLMConfig().replace(n_head=8)
