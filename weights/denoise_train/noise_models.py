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


def mix_noise(clean: torch.Tensor, n: torch.Tensor, sigma: torch.Tensor, kind: torch.Tensor, share: torch.Tensor,
              rho: torch.Tensor, clip8: torch.Tensor, zero: torch.Tensor, c0: float, c1: float) -> torch.Tensor:
    """The noisy clips of NoiseRecipe from one draw of white noise, a pure function (torch.compile
    fuses it into a per-clip mean and one elementwise pass).

    clean, n (B, T, 3, P, P): clean clips in [0, 1] and standard normal samples; per clip (B,):
    sigma in code values, kind in [0, 1) (awgn below c0, pg below c1, else ycc420), share (pg's f),
    rho (ycc420's chroma / luma std), clip8 and zero (bool: quantise to 8 bit; no noise at all).
    AWGN is pg with f = 0. ycc420 takes its luma noise from n's R' plane and its half-resolution
    Cb, Cr noise from every other sample of n's G' and B' planes (independent of the samples the
    other kinds use only within a clip, and each clip has one kind), so one draw serves every kind."""
    s = _col(sigma / 255.0)
    is_p = (kind >= c0) & (kind < c1)
    f = _col(torch.where(is_p, share, torch.zeros_like(share)))
    mean = _col(clean.mean(dim=(1, 2, 3, 4)).clamp_min(0.05))
    white = s * torch.sqrt((1 - f) + f * clean / mean) * n
    gy = s / torch.sqrt(1 + BT709_K * _col(rho) * _col(rho))
    gc = gy * _col(rho)
    ny = n[:, :, 0] * gy[:, 0]                                                  # (B, T, P, P)
    half = n[:, :, 1:, ::2, ::2]                                                # (B, T, 2, P/2, P/2)
    c = half.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2) * gc     # (B, T, 2, P, P)
    cb, cr = c[:, :, 0], c[:, :, 1]
    ycc = torch.stack([ny + 1.5748 * cr, ny - 0.1873 * cb - 0.4681 * cr, ny + 1.8556 * cb], dim=2)
    noisy = clean + torch.where(_col(kind >= c1), ycc, white)
    noisy = torch.where(_col(clip8), quantise8(noisy), noisy)
    return torch.where(_col(zero), clean, noisy)


class NoiseRecipe:
    """Draws a noise model, a level and a sigma map per clip.

    kinds: weights of awgn / pg / ycc420; clip8_share: share of clips clipped and quantised to 8
    bit; sigma ~ U(0, sigma_max) per clip. Faithfulness terms:
      zero_share: clips without noise (sigma 0); half of them get the map 0 (identity), half a map
        ~ U(0, zero_map_max) (a user's default sigma on clean footage);
      mismatch_share: noisy clips whose map is sigma * U(1, 2) (a sigma above the real noise).
    Per batch: one (8, B) draw of uniforms for the per-clip choices, one standard normal draw of
    the clips' shape, then mix_noise (compiled on CUDA with compile=True: about 4 passes over the
    batch instead of about 28 for the three models computed apart; it falls back to eager, the same
    function, if the compile fails: compile_error says why).
    """

    def __init__(self, kinds=(0.5, 0.25, 0.25), clip8_share=0.35, sigma_max=55.0, zero_share=0.06,
                 zero_map_max=20.0, mismatch_share=0.2, compile: bool = False):
        w = torch.tensor(kinds, dtype=torch.float64)
        self.cdf = (w.cumsum(0) / w.sum()).tolist()
        self.clip8_share, self.sigma_max = clip8_share, sigma_max
        self.zero_share, self.zero_map_max, self.mismatch_share = zero_share, zero_map_max, mismatch_share
        self.compile = compile
        self._mix = None
        self.compile_error = None

    def describe(self) -> str:
        return (f"per clip: AWGN / Poisson-Gaussian / Y'CbCr 4:2:0 chroma noise with cumulative shares "
                f"{[round(c, 3) for c in self.cdf]}, sigma ~ U(0, {self.sigma_max:g}) 8-bit code values (RMS R'G'B' "
                f"std), {self.clip8_share:.0%} clipped and quantised to 8 bit; {self.zero_share:.0%} clean clips "
                f"(map 0 or U(0, {self.zero_map_max:g})); {self.mismatch_share:.0%} with a map of sigma x U(1, 2)")

    def _mixer(self, cuda: bool):
        if self._mix is None:
            self._mix = mix_noise
            if self.compile and cuda:
                self._mix = torch.compile(mix_noise, dynamic=False)
        return self._mix

    def __call__(self, clean: torch.Tensor, gen: torch.Generator):
        """-> noisy (like clean), sigma map (B,) for the network, real sigma (B,)."""
        B, dev = clean.shape[0], clean.device
        sigma, kind, share, rho, q, r, zu, mu = torch.rand(8, B, device=dev, generator=gen)
        sigma = sigma * self.sigma_max
        n = torch.randn(clean.shape, device=dev, generator=gen)
        zero = r < self.zero_share
        args = (clean, n, sigma, kind, share, 0.3 + 0.9 * rho, q < self.clip8_share, zero, *self.cdf[:2])
        mix = self._mixer(dev.type == "cuda")
        try:
            noisy = mix(*args)
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as e:  # noqa: BLE001 (a compile that fails: the same function, eager)
            if mix is mix_noise:
                raise
            self.compile_error = f"{type(e).__name__}: {str(e)[:300]}"
            self._mix = mix_noise
            noisy = mix_noise(*args)
        real = torch.where(zero, torch.zeros_like(sigma), sigma)
        zmap = torch.where(r < self.zero_share / 2, torch.zeros_like(sigma), zu * self.zero_map_max)
        mism = (r >= self.zero_share) & (r < self.zero_share + self.mismatch_share)
        smap = torch.where(zero, zmap, torch.where(mism, sigma * (1 + mu), sigma))
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
