"""The sequence references read a row's lagged features as a series, oldest day first, and their
convolutions never look ahead."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedloom.data.alpha import ALPHA360
from fedloom.errors import ConfigError
from fedloom.references.config import TCNConfig, TransformerConfig
from fedloom.references.sequence import TemporalConv, as_series, sequence_layout, sinusoidal


def test_alpha360_names_are_five_fields_of_sixty_days() -> None:
    assert sequence_layout(list(ALPHA360)) == (5, 60)
    assert sequence_layout(["CLOSE3", "CLOSE2", "CLOSE1", "CLOSE0", "OPEN3", "OPEN2", "OPEN1", "OPEN0"]) == (2, 4)


@pytest.mark.parametrize("names", [["KMID", "KLEN"], ["CLOSE0", "CLOSE1"], ["CLOSE1", "CLOSE0", "OPEN0"], []], ids=str)
def test_features_that_are_not_a_lagged_grid_are_refused(names: list[str]) -> None:
    with pytest.raises(ConfigError, match="lag"):
        sequence_layout(names)


def test_rows_become_series_oldest_day_first() -> None:
    names = [f"{f}{lag}" for f in ("CLOSE", "OPEN") for lag in (2, 1, 0)]
    row = torch.tensor([[100.0 * (f == "OPEN") + int(n[-1]) for n in names for f in [n[:-1]]]])
    series = as_series(row, 2)  # [1, T=3, F=2]
    assert series.shape == (1, 3, 2)
    assert series[0, :, 0].tolist() == [2.0, 1.0, 0.0]  # CLOSE at lags 2, 1, 0
    assert series[0, -1].tolist() == [0.0, 100.0]  # the last step is today: CLOSE0, OPEN0


def test_temporal_convolutions_are_causal() -> None:
    torch.manual_seed(0)
    net = TemporalConv(3, 1, TCNConfig(hidden_size=8, num_layers=3, dropout_rate=0.0)).eval()
    x = torch.randn(4, 3, 10)  # [N, F, T] as the blocks see it
    later = x.clone()
    later[:, :, 6:] = torch.randn(4, 3, 4)
    with torch.no_grad():
        a, b = net.blocks(x), net.blocks(later)
    torch.testing.assert_close(a[:, :, :6], b[:, :, :6])  # steps before 6 never see steps 6…
    assert not torch.allclose(a[:, :, 6:], b[:, :, 6:])


def test_positional_encoding_is_the_sinusoid() -> None:
    table = sinusoidal(7, 6)
    pos, i = 5, 2  # dimension pair 2: sin at 4, cos at 5
    angle = pos / 10000 ** (2 * i / 6)
    assert table[pos, 4].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, 5].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert np.allclose(table[0].numpy(), [0, 1] * 3)


def test_a_price_feature_window_is_a_grid_and_the_plain_features_say_how_to_get_one() -> None:
    from fedloom.data.glt import GLT_FEATURES
    from fedloom.data.windows import window_names

    assert sequence_layout(window_names(GLT_FEATURES, 3)) == (11, 3)  # adj_sum_5_2: field adj_sum_5, lag 2
    with pytest.raises(ConfigError, match="feature_window"):
        sequence_layout(list(GLT_FEATURES))


def test_the_transformers_heads_must_divide_its_width() -> None:
    assert TransformerConfig(hidden_size=64, heads=4).heads == 4
    with pytest.raises(ValueError, match="hidden_size 64 is not divisible by 3 heads"):
        TransformerConfig(hidden_size=64, heads=3)
