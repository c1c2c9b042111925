"""Training noise on the GPU: the noise models of model v2 and what sigma means for each.

Every model is parameterised by sigma, the network's noise level: the root mean square, over the
R', G' and B' samples of a clip, of the noise's standard deviation, in 8-bit code values (0..255
scale), before any clipping or quantisation. For AWGN that is the usual sigma; for the others it
is the AWGN level of the same noise power, which is what a noise estimator on the R'G'B' frame
measures on average.

  awgn     R'G'B' white Gaussian noise, sigma per sample, unclipped (the benchmark's protocol).
  pg       signal-dependent (Poisson-Gaussian, Gaussian approximation): variance
           s^2 * ((1 - f) + f * v / mean(v)) per sample, v the clean value in [0, 1] and mean(v)
           its clip mean (floored at 0.05), f in [0, 1] the signal-dependent share; its mean over
           the clip is s^2, so sigma = s. (Foi et al., "Practical Poissonian-Gaussian noise
           modeling and fitting for single-image raw-data", IEEE TIP 2008, for the model.)
  ycc420   channel-correlated: white noise added to Y' at full resolution and to Cb, Cr at half
           resolution (one sample per 2x2 block, as 4:2:0 chroma carries it), converted to R'G'B'
           with the BT.709 matrix (R' = Y' + 1.5748 Cr, G' = Y' - 0.1873 Cb - 0.4681 Cr,
           B' = Y' + 1.8556 Cb; ITU-R BT.709-6 table 3). With luma std gy and chroma std
           gc = rho * gy the R'G'B' variances average gy^2 * (1 + K rho^2),
           K = (1.5748^2 + 0.1873^2 + 0.4681^2 + 1.8556^2) / 3 = 2.0591, so
           gy = sigma / sqrt(1 + K rho^2).
  any of them, "8-bit": clipped to [0, 1] and rounded to 8-bit code values, as real files are.

Shapes: clean clips (B, T, 3, P, P) float in [0, 1], P even; sigma (B,) code values.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

BT709_K = (1.5748 ** 2 + 0.1873 ** 2 + 0.4681 ** 2 + 1.8556 ** 2) / 3


def _col(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1, 1, 1, 1, 1)


def luma_bt709(x: torch.Tensor, dim: int) -> torch.Tensor:
    """R'G'B' along dim -> Y' = 0.2126 R' + 0.7152 G' + 0.0722 B' (ITU-R BT.709-6 item 3.2), size 1
    along dim. Scalar weights: no host-to-device copy (safe on the batch feed's side stream)."""
    r, g, b = x.unbind(dim)
    return (0.2126 * r + 0.7152 * g + 0.0722 * b).unsqueeze(dim)


def quantise8(x: torch.Tensor) -> torch.Tensor:
    """Clip to [0, 1] and round to 8-bit code values."""
    return torch.round(x.clamp(0, 1) * 255.0) / 255.0


def awgn(clean: torch.Tensor, sigma: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return clean + _col(sigma / 255.0) * torch.randn(clean.shape, device=clean.device, generator=gen)


def poisson_gaussian(clean: torch.Tensor, sigma: torch.Tensor, share: torch.Tensor,
                     gen: torch.Generator) -> torch.Tensor:
    """share (B,) in [0, 1]: f, the signal-dependent part of the variance (module docstring)."""
    mean = clean.mean(dim=(1, 2, 3, 4)).clamp_min(0.05)
    var = (1 - _col(share)) + _col(share) * clean / _col(mean)
    n = torch.randn(clean.shape, device=clean.device, generator=gen)
    return clean + _col(sigma / 255.0) * var.sqrt() * n


def ycc420(clean: torch.Tensor, sigma: torch.Tensor, rho: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """rho (B,): chroma std / luma std (module docstring)."""
    B, T, C, P, Q = clean.shape
    dev = clean.device
    gy = sigma / 255.0 / torch.sqrt(1 + BT709_K * rho * rho)
    gc = gy * rho
    ny = torch.randn(B, T, P, Q, device=dev, generator=gen) * gy.view(B, 1, 1, 1)
    nc = torch.randn(B, T * 2, P // 2, Q // 2, device=dev, generator=gen)
    nc = F.interpolate(nc, scale_factor=2, mode="nearest").view(B, T, 2, P, Q) * gc.view(B, 1, 1, 1, 1)
    cb, cr = nc[:, :, 0], nc[:, :, 1]
    n = torch.stack([ny + 1.5748 * cr, ny - 0.1873 * cb - 0.4681 * cr, ny + 1.8556 * cb], dim=2)
    return clean + n


class NoiseRecipe:
    """Draws a noise model, a level and a sigma map per clip.

    kinds: weights of awgn / pg / ycc420; clip8_share: share of clips clipped and quantised to 8
    bit; sigma ~ U(0, sigma_max) per clip. Faithfulness terms:
      zero_share: clips without noise (sigma 0); half of them get the map 0 (identity), half a map
        ~ U(0, zero_map_max) (a user's default sigma on clean footage);
      mismatch_share: noisy clips whose map is sigma * U(1, 2) (a sigma above the real noise).
    """

    def __init__(self, kinds=(0.5, 0.25, 0.25), clip8_share=0.35, sigma_max=55.0, zero_share=0.06,
                 zero_map_max=20.0, mismatch_share=0.2):
        w = torch.tensor(kinds, dtype=torch.float64)
        self.cdf = (w.cumsum(0) / w.sum()).tolist()
        self.clip8_share, self.sigma_max = clip8_share, sigma_max
        self.zero_share, self.zero_map_max, self.mismatch_share = zero_share, zero_map_max, mismatch_share

    def describe(self) -> str:
        return (f"per clip: AWGN / Poisson-Gaussian / Y'CbCr 4:2:0 chroma noise with cumulative shares "
                f"{[round(c, 3) for c in self.cdf]}, sigma ~ U(0, {self.sigma_max:g}) 8-bit code values (RMS R'G'B' "
                f"std), {self.clip8_share:.0%} clipped and quantised to 8 bit; {self.zero_share:.0%} clean clips "
                f"(map 0 or U(0, {self.zero_map_max:g})); {self.mismatch_share:.0%} with a map of sigma x U(1, 2)")

    def __call__(self, clean: torch.Tensor, gen: torch.Generator):
        """-> noisy (like clean), sigma map (B,) for the network, real sigma (B,)."""
        B, dev = clean.shape[0], clean.device
        u = lambda: torch.rand(B, device=dev, generator=gen)  # noqa: E731
        sigma = u() * self.sigma_max
        kind = u()
        noisy_a = awgn(clean, sigma, gen)
        noisy_p = poisson_gaussian(clean, sigma, u(), gen)
        noisy_y = ycc420(clean, sigma, 0.3 + 0.9 * u(), gen)
        c0, c1 = self.cdf[0], self.cdf[1]
        noisy = torch.where(_col(kind < c0), noisy_a, torch.where(_col(kind < c1), noisy_p, noisy_y))
        noisy = torch.where(_col(u() < self.clip8_share), quantise8(noisy), noisy)
        r = u()
        zero = r < self.zero_share
        noisy = torch.where(_col(zero), clean, noisy)
        real = torch.where(zero, torch.zeros_like(sigma), sigma)
        zmap = torch.where(r < self.zero_share / 2, torch.zeros_like(sigma), u() * self.zero_map_max)
        mism = (r >= self.zero_share) & (r < self.zero_share + self.mismatch_share)
        smap = torch.where(zero, zmap, torch.where(mism, sigma * (1 + u()), sigma))
        return noisy, smap, real


class AWGNRecipe:
    """Model v1's noise: AWGN, sigma ~ U(0, 55) per clip, unclipped, a share clipped and quantised."""

    def __init__(self, sigma_max=55.0, clip8_share=0.25):
        self.sigma_max, self.clip8_share = sigma_max, clip8_share

    def describe(self) -> str:
        return (f"AWGN, sigma ~ U(0,{self.sigma_max:g}) in 8-bit code values per clip, RGB, unclipped; "
                f"{self.clip8_share:.0%} of clips clipped to [0,1] and quantised to 8 bit")

    def __call__(self, clean: torch.Tensor, gen: torch.Generator):
        B, dev = clean.shape[0], clean.device
        sigma = torch.rand(B, device=dev, generator=gen) * self.sigma_max
        noisy = awgn(clean, sigma, gen)
        q = torch.rand(B, device=dev, generator=gen) < self.clip8_share
        return torch.where(_col(q), quantise8(noisy), noisy), sigma, sigma


def measured_sigma(noisy: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
    """RMS of (noisy - clean) per clip in code values (B,): the sigma of the definition above,
    measured (before clipping it equals sigma up to sampling error)."""
    return ((noisy - clean) ** 2).mean(dim=(1, 2, 3, 4)).sqrt() * 255.0
