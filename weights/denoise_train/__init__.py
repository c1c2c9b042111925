"""The denoiser's PyTorch side: the network (model.py, align.py: the source of truth that the CPU
and CUDA engines reproduce), the training data and noise (data.py, noise_models.py, awgn.py,
batch_feed.py), the training step and its options (train_step.py, sdpa_backends.py,
weight_ema.py, sigma_reparam.py, compile_cache.py, candidates.py, deepen.py), data-parallel
training over several GPUs (data_parallel.py), validation and the
faithfulness probe (validation.py, faithful.py), and weight files (checkpoint.py).

The entry points beside this package in weights/ (train.py, eval.py, val.py, export.py, ...)
import it as `denoise_train`; modules with a command line run as `python3 -m denoise_train.NAME`
from weights/ (or with weights/ on PYTHONPATH).
"""
