"""Data-parallel training: one process per GPU, started by torchrun, each training on its share of
the global batch, with the gradients averaged over the processes before every optimiser step.

  torchrun --standalone --nproc-per-node N weights/train.py ...     (N processes, "ranks")
  python3 weights/train.py ...                                      (one process: no group)

A process started by torchrun finds WORLD_SIZE, RANK and LOCAL_RANK in its environment
(DataParallel.from_env); without them it is the single process of old and nothing here talks to
anyone. Rank r trains on GPU LOCAL_RANK mod the visible GPU count.

Process groups (torch.distributed):
  - gradients: NCCL when every rank has a GPU of its own; gloo when ranks share a GPU (NCCL
    refuses two ranks on one device: "Duplicate GPU detected"), which copies through the host
    and cannot be captured in a CUDA graph; gloo on the CPU.
  - control: gloo on host tensors. The training loop's decisions (stop, checkpoint, the counted
    step time) are agreed on every step by one small host all-reduce (DataParallel.agree), so no
    rank ever waits on its GPU for them; rank 0's validation, probe and checkpoints happen while
    the others wait at this group's barrier (broadcast_flag).
Both with TIMEOUT: a rank may wait that long for another (rank 0's validation with the probe, or
a first step compiled on one rank and served from the cache on another).

The gradient average (GradAverage) is an explicit all-reduce of one flat fp32 buffer of every
gradient, after the whole backward and before clipping and AdamW (train_step.StepEngine calls it),
not torch's DistributedDataParallel: the graph engines capture the whole step (forward,
backward, clipping, AdamW) as one CUDA graph, and an NCCL all-reduce issued inside the captured
region is captured with it and replayed on every step (NCCL supports collectives in CUDA graphs
from 2.9, as long as every rank captures the same collectives). DDP instead issues its all-reduces
from autograd hooks with buckets and state it rebuilds between iterations, which a captured graph
freezes (PyTorch's CUDA-graph notes ask for static_graph, a side-stream construction and 11
eager warm-up iterations before capture). What DDP gains, overlapping the all-reduce with the
rest of the backward, is small here: a few million fp32 parameters are a few tens of MB, well
under a millisecond on NVLink against steps of tens of milliseconds.

The average is exact in the sense that matters: each rank's loss is a mean over its B / W clips
(train_step.loss_fn, every term a mean over equal-sized micro-batches), so the mean of the W
ranks' gradients is the gradient of the mean loss over the global batch of B clips, up to the
order of fp32 summation (tests/weights/check_data_parallel.py). Every rank then clips and steps
AdamW on the same gradient from the same weights (broadcast from rank 0 at the start), so the
weights stay identical on every rank without being sent again.
"""
from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(minutes=60)


class GradAverage:
    """grad_average(params): each parameter's .grad (those that have one) replaced by its mean over
    the group's ranks, in place (the tensors keep their storage: a captured graph's addresses stay
    valid). One all-reduce (sum) of one flat buffer per gradient dtype, then a division by the
    world size. capturable: whether it may run inside CUDA graph capture (NCCL: yes; gloo: no)."""

    def __init__(self, group, world: int, capturable: bool):
        if world < 2:
            raise ValueError(f"a gradient average needs at least 2 ranks, got {world}")
        self.group, self.world, self.capturable = group, world, capturable

    def __call__(self, params) -> None:
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for p in params:
            if p.grad is not None:
                by_dtype.setdefault(p.grad.dtype, []).append(p.grad)
        for grads in by_dtype.values():
            flat = torch.cat([g.reshape(-1) for g in grads])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=self.group)
            flat.div_(self.world)
            torch._foreach_copy_(grads, [v.view_as(g) for v, g in zip(flat.split([g.numel() for g in grads]), grads)])


class DataParallel:
    """The process's place among the ranks and the collectives train.py needs; with world 1 every
    method is the identity (no group exists).

    rank, world, local_rank; device (torch.device); main (rank 0: logs, validates, checkpoints);
    gpus: the number of distinct GPUs the ranks train on (1 when ranks share one; on the CPU the
    ranks); grad_average: a GradAverage, or None with one rank."""

    def __init__(self, rank: int = 0, world: int = 1, local_rank: int = 0, device=None, backend: str | None = None,
                 gpus: int = 1, grad_group=None, control_group=None):
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.backend, self.gpus = backend, gpus
        self.grad_group, self.control_group = grad_group, control_group
        self.main = rank == 0
        self.grad_average = (GradAverage(grad_group, world, capturable=backend == "nccl") if world > 1 else None)

    @classmethod
    def from_env(cls, device: str) -> "DataParallel":
        """From torchrun's environment (WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE), or a
        single process when WORLD_SIZE is unset. device: "cuda" (each rank takes cuda:LOCAL_RANK
        mod the visible GPU count) or "cpu". Raises ValueError on a device other than these
        with several ranks, RuntimeError when the group cannot form (torch.distributed's)."""
        if "WORLD_SIZE" not in os.environ:
            return cls(device=device)
        world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        kind = torch.device(device).type
        if kind == "cuda":
            count = torch.cuda.device_count()
            if count == 0:
                raise RuntimeError("--device cuda but no visible GPU")
            dev = torch.device("cuda", local_rank % count)
            torch.cuda.set_device(dev)
            shared = local_world > count
            backend = "gloo" if shared else "nccl"
            gpus = min(local_world, count) * (world // local_world)
        elif kind == "cpu":
            dev, backend, gpus = torch.device("cpu"), "gloo", world
        else:
            raise ValueError(f"data-parallel training runs on cuda or cpu, not {device!r}")
        if world == 1:
            return cls(device=dev)
        if backend == "nccl":
            dist.init_process_group("nccl", timeout=TIMEOUT, device_id=dev)
            control = dist.new_group(backend="gloo", timeout=TIMEOUT)
        else:
            dist.init_process_group("gloo", timeout=TIMEOUT)
            control = dist.group.WORLD
        return cls(rank, world, local_rank, dev, backend, gpus, dist.group.WORLD, control)

    def describe(self) -> dict:
        return {"world_size": self.world, "rank": self.rank, "backend": self.backend, "gpus": self.gpus}

    def agree(self, sig: int, dt: float, ckpt_due: bool) -> tuple[int, float, bool]:
        """The per-step decisions every rank must take alike, from one host all-reduce (max):
        sig: a signal number this rank was stopped by (0: none) -> the largest any rank got;
        dt: this rank's counted step seconds -> the slowest rank's (the step's wall time);
        ckpt_due: rank 0's checkpoint timer (the others' is ignored) -> whether to checkpoint now."""
        if self.world == 1:
            return sig, dt, ckpt_due
        t = torch.tensor([float(sig), dt, float(ckpt_due and self.main)], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.control_group)
        return int(t[0]), float(t[1]), bool(t[2])

    def broadcast_flag(self, value: bool) -> bool:
        """Rank 0's value on every rank; the others wait here while rank 0 works (a barrier)."""
        if self.world == 1:
            return value
        t = torch.tensor([1.0 if value else 0.0], dtype=torch.float64)
        dist.broadcast(t, src=0, group=self.control_group)
        return bool(t[0])

    def barrier(self) -> None:
        """Every rank waits here until all have come (on the control group: no GPU work)."""
        if self.world > 1:
            dist.barrier(group=self.control_group)

    @torch.no_grad()
    def broadcast_model(self, model: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers into every rank's model, in place (DDP does the same at
        construction): a model built from scratch starts from rank 0's random draw."""
        if self.world == 1:
            return
        for t in list(model.parameters()) + list(model.buffers()):
            dist.broadcast(t.data, src=0, group=self.grad_group)

    @torch.no_grad()
    def mean(self, t: torch.Tensor) -> torch.Tensor:
        """The mean over the ranks of a device tensor (a copy; for the log's loss)."""
        if self.world == 1:
            return t
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.grad_group)
        return t / self.world

    def close(self) -> None:
        if self.world > 1 and dist.is_initialized():
            dist.destroy_process_group()
