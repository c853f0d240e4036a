"""Tutorial 05: train a tensor-parallel transformer MLP block with the fused ops.

Run it (2 PEs or more; on GPUs if present, else on the host backend with CPU tensors):

    torchrun --nproc-per-node 2 tutorials/05_tensor_parallel_mlp.py [--hidden 2048 --ffn 8192 --tokens 4096]

The block is a transformer's MLP with sequence parallelism (Megatron's layout): between blocks
every PE holds 1/W of the tokens; the block normalizes them, gathers every PE's tokens into the
up projection (each PE holds 1/W of its output features), applies GELU, and the down projection
(each PE holds 1/W of its input features) reduce-scatters the tokens back, adding the residual:

    x_shard [T/W, H] -> LayerNorm -> ColumnParallelLinear [T, F/W] -> GELU
                     -> RowParallelLinear [T/W, H] -> + x_shard

The two projections are `rshmem.nn.ColumnParallelLinear` (`rshmem.ops.all_gather_matmul`: the
GEMM consumes each PE's tokens as they arrive) and `rshmem.nn.RowParallelLinear`
(`rshmem.ops.matmul_reduce_scatter`: each finished tile goes straight to the PE that owns its
rows). Their backward passes are the other fused op. Parameters that every PE holds whole
(LayerNorm, the down projection's bias) see only this PE's tokens, so their gradients are summed
over the PEs after backward (`rshmem.nn.allreduce_sequence_parallel_grads`), as Megatron does.

The same layers also build Megatron's other form, tensor parallelism with a replicated input
(`sequence_parallel=False`): every PE holds every token, the up projection copies its input into
the parallel region (identity forward, all-reduce of the input's gradient backward) and the down
projection all-reduces its output (identity backward), so a loss computed alike on every PE gives
every parameter the unparallel model's gradient with nothing to sum afterwards:

    x [T, H] -> LayerNorm -> ColumnParallelLinear(sequence_parallel=False) [T, F/W] -> GELU
             -> RowParallelLinear(sequence_parallel=False) [T, H] (all-reduce) -> + x

What the program checks: it trains the block in both forms for `--steps` SGD steps and, at every
step, compares the loss and every gradient with the same block unparallelized (every PE builds it
from the same seed and runs the whole batch); then it trains the sequence-parallel block with unfused torch
collectives (`all_gather_tensor_autograd` + matmul, matmul + `reduce_scatter_tensor_autograd`:
NCCL + cuBLAS on GPUs) and prints the time of one training step of both.

On the host backend the ops run their exact unfused host implementations (no Triton kernel), and
the times only show that the program ran.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torch.distributed as dist

import rshmem
import rshmem.nn as rnn
import rshmem.ops as ops

from _common import agree, setup


class Mlp(torch.nn.Module):
    """The unparallel block: x + down(gelu(up(norm(x))))."""

    def __init__(self, hidden: int, ffn: int, dtype, device):
        super().__init__()
        self.norm = torch.nn.LayerNorm(hidden, dtype=dtype, device=device)
        self.up = torch.nn.Linear(hidden, ffn, dtype=dtype, device=device)
        self.down = torch.nn.Linear(ffn, hidden, dtype=dtype, device=device)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class FusedMlp(torch.nn.Module):
    """This PE's part of `ref`, on the fused ops (input and output: this PE's tokens)."""

    def __init__(self, ref: Mlp):
        super().__init__()
        self.norm = copy.deepcopy(ref.norm)
        for p in self.norm.parameters():
            p.sequence_parallel = True  # held whole by every PE
        self.up = rnn.ColumnParallelLinear.from_linear(ref.up)
        self.down = rnn.RowParallelLinear.from_linear(ref.down)

    def forward(self, x_shard):
        return x_shard + self.down(torch.nn.functional.gelu(self.up(self.norm(x_shard))))


class ReplicatedMlp(torch.nn.Module):
    """This PE's part of `ref` in Megatron's tensor-parallel form (input and output: every token)."""

    def __init__(self, ref: Mlp):
        super().__init__()
        self.norm = copy.deepcopy(ref.norm)  # sees every token: its gradient is whole already
        self.up = rnn.ColumnParallelLinear.from_linear(ref.up, sequence_parallel=False)
        self.down = rnn.RowParallelLinear.from_linear(ref.down, sequence_parallel=False, input_is_parallel=True)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class UnfusedMlp(FusedMlp):
    """The same parallel block on torch.distributed's collectives and torch.matmul."""

    def forward(self, x_shard):
        import torch.distributed._functional_collectives as funcol

        group = dist.group.WORLD
        h = funcol.all_gather_tensor_autograd(self.norm(x_shard), 0, group)
        h = torch.nn.functional.gelu(h @ self.up.weight.t() + self.up.bias)
        z = funcol.reduce_scatter_tensor_autograd(h @ self.down.weight.t(), "sum", 0, group)
        return x_shard + z + self.down.bias


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hidden", type=int, default=None, help="model width H (default 2048 on GPUs, 64 on the host)")
    p.add_argument("--ffn", type=int, default=None, help="MLP width F, a multiple of the PE count (default 4 H)")
    p.add_argument("--tokens", type=int, default=None, help="tokens per step T, a multiple of the PE count "
                   "(default 4096 on GPUs, 32 on the host)")
    p.add_argument("--steps", type=int, default=3, help="checked training steps")
    p.add_argument("--iters", type=int, default=10, help="timed training steps of each form")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--backend", choices=["cuda", "host"], default=None, help="default: cuda if a GPU is present")
    p.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16",
                   help="parameters and activations (float32 multiplies as TF32 on GPUs)")
    return p.parse_args()


def gpu_shared(device) -> bool:
    """Whether PEs share this GPU: timings then mean nothing for speed."""
    import rshmem.torch as rtorch

    if device.type != "cuda":
        return False
    ask = getattr(rtorch, "gpu_shared", None)  # rshmem's own answer, where this version has it
    return ask() if ask is not None else torch.cuda.device_count() < rshmem.n_pes()


def batch(step: int, tokens: int, hidden: int, dtype, device):
    """The whole batch of step `step` (inputs and targets), the same on every PE."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn((tokens, hidden), generator=g).to(dtype).to(device)
    t = torch.randn((tokens, hidden), generator=g).to(dtype).to(device)
    return x, t


def local_loss(model, x, t, rows, total):
    """This PE's share of the mean squared error (the shares sum to the loss)."""
    y = model(x[rows])
    return (y.float() - t[rows].float()).pow(2).sum() / total


def sgd(model, lr: float) -> None:
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
            p.grad = None


def compare(name, got, want, dtype) -> str | None:
    """None when `got` matches `want` within the dtype's rounding, else what differs."""
    # float32: TF32 products on GPUs (10-bit mantissa, as fp16), exact sums on the host backend
    tol = 3e-2 if dtype == torch.bfloat16 else 5e-3
    err = (got.float() - want.float()).abs().max().item()
    scale = max(want.float().abs().max().item(), 1e-3)
    return None if err <= tol * scale else f"{name}: max difference {err:.3g} (largest value {scale:.3g})"


def check_step(par, ref, me, W, ffn, dtype) -> list:
    part = slice(me * ffn // W, (me + 1) * ffn // W)
    pairs = [("LayerNorm weight", par.norm.weight.grad, ref.norm.weight.grad),
             ("LayerNorm bias", par.norm.bias.grad, ref.norm.bias.grad),
             ("up weight", par.up.weight.grad, ref.up.weight.grad[part]),
             ("up bias", par.up.bias.grad, ref.up.bias.grad[part]),
             ("down weight", par.down.weight.grad, ref.down.weight.grad[:, part]),
             ("down bias", par.down.bias.grad, ref.down.bias.grad)]
    return [e for e in (compare(n, g, w, dtype) for n, g, w in pairs) if e]


def step_time(model, x, t, rows, total, lr, iters, device) -> float:
    """Median seconds of one training step (forward, backward, gradient sums, SGD)."""
    def one():
        local_loss(model, x, t, rows, total).backward()
        rnn.allreduce_sequence_parallel_grads(model)
        sgd(model, lr)

    for _ in range(2):
        one()
    times = []
    for _ in range(iters):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            one()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            one()
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    args = parse_args()
    device = setup(args.backend)
    me, W = rshmem.my_pe(), rshmem.n_pes()
    on_gpu = device.type == "cuda"
    hidden = args.hidden or (2048 if on_gpu else 64)
    ffn = args.ffn or 4 * hidden
    tokens = args.tokens or (4096 if on_gpu else 32)
    dtype = getattr(torch, args.dtype)
    if ffn % W or tokens % W:
        raise SystemExit(f"--ffn {ffn} and --tokens {tokens} must be multiples of the PE count {W}")
    say = print if me == 0 else (lambda *a, **k: None)
    say(f"tensor-parallel MLP block: hidden {hidden}, ffn {ffn}, {tokens} tokens per step, {dtype}, {W} PEs on the "
        f"{rshmem.backend()} backend")

    torch.manual_seed(0)  # the same block on every PE
    ref = Mlp(hidden, ffn, dtype, device)
    par = FusedMlp(ref)
    rows = slice(me * tokens // W, (me + 1) * tokens // W)

    bad = []
    for step in range(args.steps):
        x, t = batch(step, tokens, hidden, dtype, device)
        loss = local_loss(par, x, t, rows, tokens * hidden)
        loss.backward()
        rnn.allreduce_sequence_parallel_grads(par)
        total = ops.all_reduce(loss.detach().reshape(1), op="sum").item()
        want = local_loss(ref, x, t, slice(0, tokens), tokens * hidden)
        want.backward()
        errors = check_step(par, ref, me, W, ffn, dtype)
        err = compare("loss", torch.tensor(total), want.detach().cpu(), dtype)
        errors += [err] if err else []
        bad += [f"step {step}: {e}" for e in errors]
        say(f"step {step}: loss {total:.5f} (unparallel block {want.item():.5f}), "
            f"{'gradients match' if not errors else 'MISMATCH'}")
        sgd(par, args.lr)
        sgd(ref, args.lr)
    for line in bad:
        print(f"PE {me}: {line}")
    if not agree(not bad, device):
        raise SystemExit("the fused block's loss or gradients differ from the unparallel block's (see above)")
    say(f"training with the fused ops matches the unparallel block: loss and every gradient, {args.steps} steps")

    # Megatron's replicated-input form: every PE computes the whole loss (the same value) itself.
    torch.manual_seed(1)
    ref2 = Mlp(hidden, ffn, dtype, device)
    tp = ReplicatedMlp(ref2)
    bad = []
    for step in range(args.steps):
        x, t = batch(step, tokens, hidden, dtype, device)
        loss = local_loss(tp, x, t, slice(0, tokens), tokens * hidden)
        loss.backward()
        want = local_loss(ref2, x, t, slice(0, tokens), tokens * hidden)
        want.backward()
        errors = check_step(tp, ref2, me, W, ffn, dtype)
        err = compare("loss", loss.detach(), want.detach(), dtype)
        errors += [err] if err else []
        bad += [f"replicated form, step {step}: {e}" for e in errors]
        say(f"replicated form, step {step}: loss {loss.item():.5f} (unparallel block {want.item():.5f}), "
            f"{'gradients match' if not errors else 'MISMATCH'}")
        sgd(tp, args.lr)
        sgd(ref2, args.lr)
    for line in bad:
        print(f"PE {me}: {line}")
    if not agree(not bad, device):
        raise SystemExit("the replicated-input block's loss or gradients differ from the unparallel block's")
    say(f"training in Megatron's replicated-input form matches the unparallel block too, {args.steps} steps")

    x, t = batch(0, tokens, hidden, dtype, device)
    fused = step_time(par, x, t, rows, tokens * hidden, args.lr, args.iters, device)
    unfused_model = UnfusedMlp(ref)
    how = "NCCL + cuBLAS" if dist.get_backend() == "nccl" else f"{dist.get_backend()} + torch.matmul"
    if on_gpu and dist.get_backend() == "gloo":
        # Seen with torch 2.11 on one shared H100: the process dies of SIGSEGV inside
        # funcol.all_gather_tensor_autograd on a gloo group with CUDA tensors (no exception to catch).
        unfused, why = None, "torch's functional collectives on gloo with CUDA tensors crash the process"
    else:
        try:
            unfused = step_time(unfused_model, x, t, rows, tokens * hidden, args.lr, args.iters, device)
        except Exception as e:  # noqa: BLE001 - e.g. a process group backend without these collectives
            unfused, why = None, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    clock = f"CUDA events, median of {args.iters}" if on_gpu else f"host clock, median of {args.iters}"
    say(f"training step time ({clock}):")
    say(f"  {'fused (rshmem.ops AllGather+GEMM, GEMM+ReduceScatter):':58s} {fused * 1e3:9.3f} ms")
    if unfused is None:
        say(f"  {'unfused (' + how + '):':58s} not runnable here ({why})")
    else:
        say(f"  {'unfused (' + how + '):':58s} {unfused * 1e3:9.3f} ms")
    if not on_gpu:
        say("the host backend runs the ops' unfused host implementations (no Triton kernel): these times mean "
            "nothing for speed")
    elif gpu_shared(device):
        say("the PEs share one GPU: these times mean nothing for speed (the fused kernels of both PEs time-slice "
            "the GPU)")

    rshmem.barrier_all()
    rshmem.finalize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
