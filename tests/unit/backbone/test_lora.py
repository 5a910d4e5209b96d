"""The adapter bank's layer math, on hand-placed tensors and random ones."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from fedloom.backbone.lora import (
    AdapterBank,
    Binding,
    LoraLinear,
    LoraSpec,
    _BindingSlot,
    base_delta_key,
    lora_a_key,
    lora_b_key,
)
from fedloom.errors import ConfigError

D_IN, D_OUT, R = 6, 5, 2


def _layer(dropout: float = 0.0) -> tuple[LoraLinear, _BindingSlot]:
    cell = _BindingSlot()
    base = nn.Linear(D_IN, D_OUT, bias=True).requires_grad_(False)  # frozen, as in a loaded backbone
    return LoraLinear(base, "m", LoraSpec(rank=R, alpha=4.0, dropout=dropout), cell), cell


def _slot(slot: str, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        lora_a_key("m", slot): torch.randn(R, D_IN, generator=g),
        lora_b_key("m", slot): torch.randn(D_OUT, R, generator=g),
    }


def test_single_slot_is_base_plus_scaled_ba():
    layer, cell = _layer()
    p = _slot("default", 0)
    x = torch.randn(3, 4, D_IN)
    cell.binding = Binding(p)
    expected = layer.base(x) + 2.0 * x @ (p[lora_b_key("m")] @ p[lora_a_key("m")]).T  # s = alpha / r = 2
    torch.testing.assert_close(layer(x), expected)


def test_hand_placed_weights():
    layer, cell = _layer()
    with torch.no_grad():
        layer.base.weight.zero_()
        layer.base.bias.zero_()
    A = torch.zeros(R, D_IN)
    A[0, 1] = 1.0  # reads x[1]
    B = torch.zeros(D_OUT, R)
    B[3, 0] = 0.5  # writes to y[3]
    cell.binding = Binding({lora_a_key("m"): A, lora_b_key("m"): B})
    x = torch.zeros(1, D_IN)
    x[0, 1] = 3.0
    y = layer(x)
    assert y[0, 3].item() == pytest.approx(2.0 * 0.5 * 3.0)
    assert y.abs().sum().item() == pytest.approx(3.0)


def test_unbound_and_zero_b_leave_the_base_unchanged():
    layer, cell = _layer()
    x = torch.randn(2, D_IN)
    assert torch.equal(layer(x), layer.base(x))
    p = _slot("default", 1)
    p[lora_b_key("m")] = torch.zeros(D_OUT, R)
    cell.binding = Binding(p)
    torch.testing.assert_close(layer(x), layer.base(x))


def test_base_delta_adds_a_dense_update():
    layer, cell = _layer()
    delta = torch.randn(D_OUT, D_IN)
    cell.binding = Binding({base_delta_key("m"): delta}, slots=())
    x = torch.randn(2, D_IN)
    torch.testing.assert_close(layer(x), layer.base(x) + x @ delta.T)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_soft_mixture_is_the_weighted_sum_of_single_slots(n: int, seed: int):
    layer, cell = _layer()
    slots = ("e0", "e1", "e2")
    params = {k: v for i, s in enumerate(slots) for k, v in _slot(s, seed + i).items()}
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, D_IN, generator=g)
    w = torch.softmax(torch.randn(n, 3, generator=g), dim=1)
    cell.binding = Binding(params, slots=slots, weights=w)
    mixed = layer(x)
    base = layer.base(x)
    expected = base.clone()
    for k, s in enumerate(slots):
        cell.binding = Binding(params, slots=(s,))
        expected += w[:, k, None, None] * (layer(x) - base)
    torch.testing.assert_close(mixed, expected, atol=1e-5, rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), ranks=st.lists(st.integers(1, 4), min_size=2, max_size=4), weighted=st.booleans(),
       seed=st.integers(0, 10_000))  # fmt: skip
def test_fused_slots_equal_each_slot_on_its_own_in_value_and_gradient(n, ranks, weighted, seed):
    """One ``x @ A`` for every slot (ranks may differ, so do their scales α/r) is the sum of the slots run
    one by one, forward and backward (every A and B gets the same gradient)."""
    layer, cell = _layer()
    g = torch.Generator().manual_seed(seed)
    slots = tuple(f"e{i}" for i in range(len(ranks)))
    params = {}
    for s, r in zip(slots, ranks, strict=True):
        params[lora_a_key("m", s)] = torch.randn(r, D_IN, generator=g).requires_grad_(True)
        params[lora_b_key("m", s)] = torch.randn(D_OUT, r, generator=g).requires_grad_(True)
    x = torch.randn(n, 3, D_IN, generator=g)
    w = torch.softmax(torch.randn(n, len(slots), generator=g), dim=1) if weighted else None
    cell.binding = Binding(params, slots=slots, weights=w)
    fused = layer(x)
    fused_grads = torch.autograd.grad(fused.square().sum(), list(params.values()), retain_graph=True)
    expected = layer.base(x)
    for k, s in enumerate(slots):
        cell.binding = Binding(params, slots=(s,))
        part = layer(x) - layer.base(x)
        expected = expected + (part if w is None else w[:, k, None, None] * part)
    torch.testing.assert_close(fused, expected, atol=1e-5, rtol=1e-5)
    for got, want in zip(
        fused_grads, torch.autograd.grad(expected.square().sum(), list(params.values())), strict=True
    ):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)


def test_fused_slots_share_one_dropout_mask():
    """Dropout is applied once to x for all slots: two identical slots at weights ½, ½ equal one slot."""
    layer, cell = _layer(dropout=0.5)
    one = _slot("a", 0)
    two = {**one, lora_a_key("m", "b"): one[lora_a_key("m", "a")], lora_b_key("m", "b"): one[lora_b_key("m", "a")]}
    x = torch.randn(4, D_IN)
    torch.manual_seed(7)
    cell.binding = Binding(two, slots=("a", "b"), weights=torch.full((4, 2), 0.5), train=True)
    mixed = layer(x)
    torch.manual_seed(7)
    cell.binding = Binding(one, slots=("a",), train=True)
    torch.testing.assert_close(mixed, layer(x))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 8), k=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_top_k_equals_dense_with_renormalized_top_k_weights(n: int, k: int, seed: int):
    layer, cell = _layer()
    slots = ("e0", "e1", "e2")
    params = {key: v for i, s in enumerate(slots) for key, v in _slot(s, seed + i).items()}
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, D_IN, generator=g)
    w = torch.softmax(torch.randn(n, 3, generator=g), dim=1)
    cell.binding = Binding(params, slots=slots, weights=w, top_k=k)
    sparse = layer(x)
    vals, idx = w.topk(k, dim=1)
    dense_w = torch.zeros_like(w).scatter(1, idx, vals / vals.sum(1, keepdim=True))
    cell.binding = Binding(params, slots=slots, weights=dense_w)
    torch.testing.assert_close(sparse, layer(x), atol=1e-5, rtol=1e-5)


def test_top_1_runs_only_the_chosen_slot():
    layer, cell = _layer()
    slots = ("e0", "e1", "e2")
    params = {k: v for i, s in enumerate(slots) for k, v in _slot(s, i).items()}
    w = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    calls: list[tuple[str, int]] = []
    original = layer._slot_output

    def spy(x, slot, b):
        calls.append((slot, x.shape[0]))
        return original(x, slot, b)

    layer._slot_output = spy  # type: ignore[method-assign]
    cell.binding = Binding(params, slots=slots, weights=w, top_k=1)
    layer(torch.randn(2, D_IN))
    assert sorted(calls) == [("e0", 1), ("e2", 1)]


def test_dropout_only_in_training_bindings():
    layer, cell = _layer(dropout=0.5)
    p = _slot("default", 0)
    x = torch.randn(4, D_IN)
    cell.binding = Binding(p, train=False)
    torch.testing.assert_close(layer(x), layer(x))
    cell.binding = Binding(p, train=True)
    torch.manual_seed(0)
    a = layer(x)
    torch.manual_seed(1)
    assert not torch.allclose(a, layer(x))


def test_gradients_flow_to_bound_tensors_only():
    layer, cell = _layer()
    p = {k: v.requires_grad_(True) for k, v in _slot("default", 0).items()}
    cell.binding = Binding(p)
    F.mse_loss(layer(torch.randn(3, D_IN)), torch.zeros(3, D_OUT)).backward()
    assert all(v.grad is not None for v in p.values())
    assert layer.base.weight.grad is None


def test_bank_wraps_targets_in_chosen_layers(tiny_backbone):
    bank = AdapterBank(tiny_backbone.model, LoraSpec(layers=(1, 3)))
    paths = [m.path for m in bank.layout.modules]
    assert paths == [
        "model.layers.1.self_attn.q_proj",
        "model.layers.1.self_attn.v_proj",
        "model.layers.3.self_attn.q_proj",
        "model.layers.3.self_attn.v_proj",
    ]
    assert isinstance(tiny_backbone.model.model.layers[3].self_attn.v_proj, LoraLinear)
    assert not isinstance(tiny_backbone.model.model.layers[0].self_attn.q_proj, LoraLinear)
    assert bank.layout.lowest_layer == 1


def test_bank_errors_name_the_problem(tiny_backbone):
    with pytest.raises(ConfigError, match=r"adapter.layers \[7\] out of range: the model has 4 layers"):
        AdapterBank(tiny_backbone.model, LoraSpec(layers=(7,)))
    with pytest.raises(ConfigError, match=r"match no Linear layer.*layer 0 has: .*q_proj"):
        AdapterBank(tiny_backbone.model, LoraSpec(targets=("qkv",)))
    AdapterBank(tiny_backbone.model, LoraSpec(layers=(2, 3)))
    with pytest.raises(ConfigError, match=r"layers \[3\] already carry an adapter bank"):
        AdapterBank(tiny_backbone.model, LoraSpec(layers=(1, 3)))
    AdapterBank(tiny_backbone.model, LoraSpec(layers=(0, 1)))  # disjoint layers: a second bank (FedBiOT)


def test_init_slot_matches_peft_defaults(tiny_backbone):
    layout = AdapterBank(tiny_backbone.model, LoraSpec(rank=4)).layout
    params = layout.init_slot(torch.Generator().manual_seed(0))
    for m in layout.modules:
        A, B = params[lora_a_key(m.path)], params[lora_b_key(m.path)]
        assert A.shape == (4, m.d_in) and B.shape == (m.d_out, 4)
        assert torch.count_nonzero(B) == 0
        assert A.abs().max() <= 1 / m.d_in**0.5
    again = layout.init_slot(torch.Generator().manual_seed(0))
    assert all(torch.equal(params[k], again[k]) for k in params)


def test_slot_layout_is_the_flat_adapter_vector(tiny_backbone):
    layout = AdapterBank(tiny_backbone.model, LoraSpec(rank=4, layers=(2, 3))).layout
    params = layout.init_slot(torch.Generator().manual_seed(0), slot="e1")
    flat = layout.slot("e1").flatten(params)
    # q_proj 64→64 and v_proj 64→32 in two layers: Σ r (d_in + d_out)
    assert flat.numel() == 2 * 4 * ((64 + 64) + (64 + 32))
    back = layout.slot("e1").unflatten(flat)
    assert list(back) == [k for k, _ in layout.slot("e1").entries]
    assert all(torch.equal(back[k], params[k]) for k in params)
    assert all(".e1." in k for k in back)


def _saved_bytes(fn, inputs: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``fn()`` and the bytes of the distinct float32 storages besides ``inputs``' own that autograd saves
    for its backward."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.dtype == torch.float32 and t.untyped_storage().data_ptr() != inputs.untyped_storage().data_ptr():
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, sum(storages.values())


@pytest.mark.parametrize("dtype,dropout", [(torch.bfloat16, 0.0), (torch.bfloat16, 0.3), (torch.float32, 0.3)])
def test_dropped_input_is_recomputed_not_kept(dtype, dropout):
    """Training with dropout or with bf16 frozen activations keeps no full-width fp32 copy of ``x`` for the
    backward pass (it is recomputed from ``x`` and the RNG state), and gives the plain path's dropout mask,
    output and gradients."""
    d_in, rank = 64, 2
    cell = _BindingSlot()
    base = nn.Linear(d_in, D_OUT).requires_grad_(False).to(dtype)
    layer = LoraLinear(base, "m", LoraSpec(rank=rank, alpha=4.0, dropout=dropout), cell)
    g = torch.Generator().manual_seed(0)
    A = torch.randn(rank, d_in, generator=g).requires_grad_(True)
    B = torch.randn(D_OUT, rank, generator=g).requires_grad_(True)
    x = torch.randn(32, 16, d_in, generator=g).to(dtype).requires_grad_(True)
    cell.binding = Binding({lora_a_key("m"): A, lora_b_key("m"): B}, train=True)
    torch.manual_seed(3)
    y, kept = _saved_bytes(lambda: layer(x), x)
    assert kept < 4 * x.numel() / 4  # the plain path keeps a new fp32 copy of x (two with dropout)
    torch.manual_seed(3)  # the plain path: dropout(x.to(A.dtype)) kept for A's gradient
    want = base(x) + (2.0 * F.linear(F.linear(F.dropout(x.to(A.dtype), dropout, True), A), B)).to(dtype)
    torch.testing.assert_close(y, want)
    got = torch.autograd.grad(y.float().pow(2).sum(), [A, B, x])
    expected = torch.autograd.grad(want.float().pow(2).sum(), [A, B, x])
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
