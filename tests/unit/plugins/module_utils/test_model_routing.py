# -*- coding: utf-8 -*-
"""model_checks' reference router (route, route_inputs) and expert count for
each family's routing, on CPU tensors against cases computed by hand: softmax
top-k with and without renormalization, the sigmoid with a score correction
bias and grouped top-k scaled by routed_scaling_factor (DeepSeek-V3), the
softmax grouped top-k (DeepSeek-V2), and Llama 4's sigmoid weight on the
expert's input. They need torch; an interpreter without it skips them (the
integration suite runs the same router on its CPU torch). And how many
experts the check keeps for a grouped router, without torch."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import model_checks as mc


@pytest.fixture(name='torch')
def torch_fixture():
    return pytest.importorskip('torch')


def logit(p):
    """The logit whose sigmoid is p."""
    return math.log(p / (1.0 - p))


def close(tensor, expected):
    import torch  # only called by tests that have it
    return torch.allclose(tensor.float(), torch.tensor(expected, dtype=torch.float32), atol=1e-6)


def test_softmax_top_k_with_and_without_renormalize(torch):
    # softmax of log(1..4) is (1, 2, 3, 4) / 10: the top 2 are experts 3 and 2
    logits = torch.tensor([[math.log(1.0), math.log(2.0), math.log(3.0), math.log(4.0)]])
    weights, ids = mc.route(torch, logits, 2, False)
    assert ids.tolist() == [[3, 2]] and ids.dtype == torch.int32 and close(weights, [[0.4, 0.3]])
    weights, ids = mc.route(torch, logits, 2, True)
    assert ids.tolist() == [[3, 2]] and close(weights, [[4 / 7, 3 / 7]])
    # an empty routing is the same router
    assert close(mc.route(torch, logits, 2, True, {})[0], [[4 / 7, 3 / 7]])


# DeepSeek-V3's router on 8 experts in 4 groups of 2, top 2 groups, top 2:
# sigmoid scores s, choice = s + bias
#   expert  0    1  | 2    3   | 4    5   | 6    7
#   s       0.8  0.2| 0.6  0.6 | 0.6  0.2 | 0.9  0.1
#   bias    0    0  | 0    0   | 0.3  0.6 | 0    0
#   choice  0.8  0.2| 0.6  0.6 | 0.9  0.8 | 0.9  0.1
# group scores (sum of the top two choices): 1.0, 1.2, 1.7, 1.0 -> groups 2 and 1;
# the top 2 of experts 2..5 by choice: 4 (0.9), 5 (0.8), though expert 6's
# score is the highest and expert 5's the lowest but one. Weights from s, not
# the choice: 0.6, 0.2 -> renormalized 0.75, 0.25 -> times 2.5: 1.875, 0.625.
V3_LOGITS = [logit(p) for p in (0.8, 0.2, 0.6, 0.6, 0.6, 0.2, 0.9, 0.1)]
V3_BIAS = [0.0, 0.0, 0.0, 0.0, 0.3, 0.6, 0.0, 0.0]
V3_ROUTING = {'scoring': 'sigmoid', 'n_group': 4, 'topk_group': 2, 'correction_bias': True,
              'routed_scaling_factor': 2.5}


def test_sigmoid_grouped_top_k_with_the_correction_bias_and_scaling(torch):
    weights, ids = mc.route(torch, torch.tensor([V3_LOGITS]), 2, True, V3_ROUTING, torch.tensor(V3_BIAS))
    assert ids.tolist() == [[4, 5]]
    assert close(weights, [[1.875, 0.625]])


def test_the_same_router_without_renormalize_scales_the_raw_scores(torch):
    weights, ids = mc.route(torch, torch.tensor([V3_LOGITS]), 2, False, V3_ROUTING, torch.tensor(V3_BIAS))
    assert ids.tolist() == [[4, 5]] and close(weights, [[1.5, 0.5]])


def test_the_sigmoid_without_groups_nor_bias_is_the_plain_top_k(torch):
    routing = {'scoring': 'sigmoid'}
    weights, ids = mc.route(torch, torch.tensor([V3_LOGITS]), 2, False, routing)
    assert ids.tolist() == [[6, 0]] and close(weights, [[0.9, 0.8]])


def test_softmax_grouped_top_k_takes_each_groups_best(torch):
    # DeepSeek-V2's group_limited_greedy: softmax (0.05, 0.45 | 0.25, 0.25); group
    # maxima 0.45 and 0.25 -> group 0 only, so the second expert is 0 (0.05), not 2 or 3
    logits = torch.tensor([[math.log(p) for p in (0.05, 0.45, 0.25, 0.25)]])
    weights, ids = mc.route(torch, logits, 2, False, {'n_group': 2, 'topk_group': 1})
    assert ids.tolist() == [[1, 0]] and close(weights, [[0.45, 0.05]])


def test_llama4_weight_on_the_input(torch):
    # sigmoid(log 3) = 0.75 picks expert 1; x [1, 2] enters it as [0.75, 1.5] with weight 1
    moe = {'top_k': 1, 'renormalize': False, 'routing': {'scoring': 'sigmoid', 'weight_on_input': True}}
    x = torch.tensor([[1.0, 2.0]])
    routed, weights, ids = mc.route_inputs(torch, x, torch.tensor([[0.0, math.log(3.0)]]), moe)
    assert ids.tolist() == [[1]] and close(weights, [[1.0]]) and close(routed, [[0.75, 1.5]])
    # experts: gate e1 = [0, 1], up e1 = [1, 0], down e1 = [[3], [0]]
    gate = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    up = torch.tensor([[[0.0, 1.0]], [[1.0, 0.0]]])
    down = torch.tensor([[[1.0], [2.0]], [[3.0], [0.0]]])
    out = mc.reference_moe(torch, routed, weights, ids, gate, up, down)
    # down @ (silu(1.5) * 0.75) = [3 * 0.75 * 1.5 * sigmoid(1.5), 0]
    silu = 1.5 / (1.0 + math.exp(-1.5))
    assert close(out, [[3 * 0.75 * silu, 0.0]])
    # the weight on the output instead would give 0.75 * 3 * silu(2) * 1
    assert not close(out, [[0.75 * 3 * 2 / (1.0 + math.exp(-2.0)), 0.0]])


def test_route_inputs_without_routing_keeps_x_and_the_weights(torch):
    moe = {'top_k': 1, 'renormalize': False}
    x = torch.tensor([[1.0, 2.0]])
    routed, weights, ids = mc.route_inputs(torch, x, torch.tensor([[0.0, math.log(3.0)]]), moe)
    assert routed is x and ids.tolist() == [[1]] and close(weights, [[0.75]])


# ---------------------------------------------------------------- experts kept

def test_a_grouped_router_keeps_whole_groups():
    # DeepSeek-V3 at tp 1: 3 * 7168 * 2048 * 2 bytes an expert, 48 of them within 4 GiB: 6 per group of 8
    moe = {'experts': 256, 'top_k': 8, 'hidden': 7168, 'intermediate': 2048, 'renormalize': True,
           'routing': {'scoring': 'sigmoid', 'n_group': 8, 'topk_group': 4, 'correction_bias': True}}
    assert mc.moe_experts(moe) == 48
    # a budget of 20 experts: 2 per group (16), not 20
    assert mc.moe_experts(moe, budget=20 * 3 * 7168 * 2048 * 2) == 16
    # a budget of 3: still 2 per group (the top two of each group), 16
    assert mc.moe_experts(moe, budget=3 * 3 * 7168 * 2048 * 2) == 16
    # all of them when they fit
    assert mc.moe_experts(moe, budget=1 << 40) == 256


def test_an_ungrouped_router_keeps_what_fits():
    moe = {'experts': 384, 'top_k': 8, 'hidden': 7168, 'intermediate': 2048, 'renormalize': True,
           'routing': {'scoring': 'sigmoid', 'correction_bias': True, 'routed_scaling_factor': 2.827}}
    assert mc.moe_experts(moe) == 48
    assert mc.moe_experts(moe, budget=1) == 8
