"""Sigma-reparametrised attention inputs for training (model v2; the engines never see them).

Why: the first two v2 runs diverged through attention-logit growth (docs/model.md): the qkv
weights of a few Swin blocks and the LayerNorm before them grew together (qkv 10 -> 150,
LayerNorm-1 bias 0.06 -> 12) until the softmax saturated. Zhai et al. 2023 ("Stabilizing
Transformer Training by Preventing Attention Entropy Collapse", ICML) bound the logits by
training each weight as

    W = gamma * V / sigma_max(V)                (sigma-reparametrisation)

with V the free matrix, gamma a learned scalar and sigma_max(V) from one power-iteration step
per training forward (u, v kept as buffers; the gradient flows through u^T V v with u, v fixed,
as in spectral normalisation, Miyato et al. 2018).

Here, per Swin block: LayerNorm-1's affine is folded into the qkv linear first (norm1 feeds only
the attention, so W' = W diag(g), b' = b + W beta is exact) and then held at weight 1, bias 0;
the qkv weight is sigma-reparametrised with gamma = sigma_max(W') at the switch, so the function
is unchanged when it is switched on. The LayerNorm output has norm sqrt(C) per token, so
||q||, ||k|| <= gamma sqrt(C) + ||bias||: the weights' share of the logits grows only with the one
scalar gamma per block (an AdamW step moves it by about lr). The qkv bias stays free (and now
holds LayerNorm-1's bias, one of the terms that grew in the diverged run): train.py's attn_norms
logs its norm beside gamma.

Export and the engines: fold() writes the effective W into a plain qkv weight (norm1 stays at
1 / 0), so the weight file is an ordinary model v2 file (weights/export.py calls it).
State: a checkpoint of a reparametrised model has the keys of torch.nn.utils.parametrize
(attn.qkv.parametrizations.weight.original, ...weight.0.gamma / .u / .v); enable() must run
before load_state_dict of such a checkpoint (weights/train.py records it in the run's state).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize


class SigmaReparam(nn.Module):
    """Parametrisation V -> gamma * V / sigma_max(V) of an (out, in) weight."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        with torch.no_grad():
            w = weight.detach().float()
            U, S, Vh = torch.linalg.svd(w, full_matrices=False)
        self.register_buffer("u", U[:, 0].clone().to(weight.dtype))
        self.register_buffer("v", Vh[0].clone().to(weight.dtype))
        self.gamma = nn.Parameter(S[0].clone().to(weight.dtype))

    def sigma(self, V: torch.Tensor) -> torch.Tensor:
        """u^T V v: sigma_max(V) at the power iteration's current vectors (differentiable in V)."""
        return torch.dot(self.u, V @ self.v)

    def forward(self, V: torch.Tensor) -> torch.Tensor:
        if self.training:
            with torch.no_grad():   # one power-iteration step (the vectors follow V as it trains)
                v = F.normalize(V.t() @ self.u, dim=0, eps=1e-12)
                u = F.normalize(V @ v, dim=0, eps=1e-12)
                self.v.copy_(v)
                self.u.copy_(u)
        return V * (self.gamma / self.sigma(V))


def swin_blocks(model: nn.Module):
    """The model's Swin blocks (the modules with norm1 and attn.qkv)."""
    # SwinBlock is recognised by its parts (no import of model.py: no cycle)
    for m in model.modules():
        if hasattr(m, "norm1") and hasattr(m, "attn") and hasattr(m.attn, "qkv"):
            yield m


def is_enabled(model: nn.Module) -> bool:
    return any(parametrize.is_parametrized(b.attn.qkv, "weight") for b in swin_blocks(model))


@torch.no_grad()
def enable(model: nn.Module, fold_norm: bool = True) -> nn.Module:
    """Switch every Swin block's qkv to the sigma-reparametrised form, in place; the function is
    unchanged (up to rounding). fold_norm=False skips the LayerNorm folding: for a model whose
    checkpoint will be loaded right after (its norm1 is already 1 / 0, its qkv values replace
    these). Returns the model."""
    for b in swin_blocks(model):
        if parametrize.is_parametrized(b.attn.qkv, "weight"):
            continue
        qkv, n = b.attn.qkv, b.norm1
        if fold_norm:
            qkv.bias.add_(qkv.weight @ n.bias)
            qkv.weight.mul_(n.weight[None, :])
        n.weight.fill_(1.0)
        n.bias.zero_()
        n.weight.requires_grad_(False)
        n.bias.requires_grad_(False)
        parametrize.register_parametrization(qkv, "weight", SigmaReparam(qkv.weight))
    return model


@torch.no_grad()
def power_steps(model: nn.Module, n: int = 20) -> nn.Module:
    """n power-iteration steps of every reparametrised qkv weight's (u, v) on its current V, in
    place: for weights set from elsewhere (a moving average, denoise_train/weight_ema.py), whose V the
    vectors have not followed. Returns the model."""
    for b in swin_blocks(model):
        if not parametrize.is_parametrized(b.attn.qkv, "weight"):
            continue
        p = b.attn.qkv.parametrizations.weight
        V, r = p.original, p[0]
        for _ in range(n):
            v = F.normalize(V.t() @ r.u, dim=0, eps=1e-12)
            u = F.normalize(V @ v, dim=0, eps=1e-12)
            r.v.copy_(v)
            r.u.copy_(u)
    return model


@torch.no_grad()
def fold(model: nn.Module) -> nn.Module:
    """Plain weights again: each qkv weight becomes its effective gamma V / sigma_max(V) (norm1
    stays at 1 / 0), in place. Returns the model."""
    was = model.training
    model.eval()   # no power-iteration step while reading the effective weights
    for b in swin_blocks(model):
        if parametrize.is_parametrized(b.attn.qkv, "weight"):
            parametrize.remove_parametrizations(b.attn.qkv, "weight", leave_parametrized=True)
        b.norm1.weight.requires_grad_(True)
        b.norm1.bias.requires_grad_(True)
    model.train(was)
    return model


@torch.no_grad()
def gammas(model: nn.Module) -> list:
    """Each reparametrised block's gamma (empty when not enabled)."""
    return [float(b.attn.qkv.parametrizations.weight[0].gamma) for b in swin_blocks(model)
            if parametrize.is_parametrized(b.attn.qkv, "weight")]
