#!/usr/bin/python3
"""The PyTorch peer of bench_kernels: the same functions on the same sizes
(n floats per array, rows of --row), float32 on the CPU, outputs
preallocated and written with out= (or the aten op's grad_input=) where
PyTorch has such a variant. Data as bench_kernels: x uniform in [-2, 2),
z uniform in [0, 1), log on |x| + 1e-3, sparse label of row r = r % row.
Each kernel's median time over --repeats rounds, in GB/s of the explicit
bytes bench_kernels counts for the cairn kernel of the same name (so the
two GB/s figures are directly comparable), one JSON line per kernel.
The loss kernels are timed as forward + gradient, the way autograd runs
them: cross_entropy = log_softmax, nll_loss, nll_loss_backward,
log_softmax_backward (with class-probability targets for xent_row);
binary_cross_entropy_with_logits + (sigmoid(x) − z)·scale; mse_loss +
mse_loss_backward.
Run with Debian's python3-torch:
  /usr/bin/python3 bench/torch_kernels.py [--threads T] [--n N] [--row R] [--repeats K] [--only a,b]"""
import argparse, json, os, statistics, time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--n", type=int, default=16 << 20)
ap.add_argument("--row", type=int, default=1000)
ap.add_argument("--repeats", type=int, default=5)
ap.add_argument("--only", default="")
a = ap.parse_args()
torch.set_num_threads(a.threads)
A = torch.ops.aten
ROW = a.row
N = (a.n + ROW - 1) // ROW * ROW
# which of its vector kernels PyTorch runs here (its own build summary)
CAP = next((l.split(":", 1)[1].strip() for l in torch.__config__.show().splitlines() if "CPU capability" in l), "")
R = N // ROW
g = torch.Generator().manual_seed(1)
X = 4.0 * (torch.rand(N, generator=g) - 0.5)
Z = torch.rand(N, generator=g)
XP = X.abs() + 1e-3
Y = torch.empty(N)
DX = torch.empty(N)
X2, Z2, Y2, DX2 = X.view(R, ROW), Z.view(R, ROW), Y.view(R, ROW), DX.view(R, ROW)
LAB = torch.arange(R) % ROW
LSM = torch.empty(R, ROW)  # cross_entropy's saved log_softmax
GB = torch.empty(R, ROW)  # the gradient nll_loss_backward writes
SC = 1e-3
GSC = torch.tensor(SC)
L0 = torch.empty(())
TW = torch.empty(())
SOFTMAX_Y = torch.softmax(X2, 1)
LOGSOFTMAX_Y = torch.log_softmax(X2, 1)
F32 = torch.float32
SUM = 2  # at::Reduction::Sum


def sparse_xent():
    A._log_softmax.out(X2, 1, False, out=LSM)
    A.nll_loss_forward.output(LSM, LAB, None, SUM, -100, output=L0, total_weight=TW)
    A.nll_loss_backward.grad_input(GSC, LSM, LAB, None, SUM, -100, TW, grad_input=GB)
    A._log_softmax_backward_data.out(GB, LSM, 1, F32, out=DX2)
    return L0


def xent():
    A._log_softmax.out(X2, 1, False, out=LSM)
    torch.mul(LSM, Z2, out=GB)
    loss = -GB.sum()
    torch.mul(Z2, -SC, out=GB)
    A._log_softmax_backward_data.out(GB, LSM, 1, F32, out=DX2)
    return loss


def sigmoid_xent():
    loss = A.binary_cross_entropy_with_logits(X, Z, None, None, SUM)
    torch.sigmoid(X, out=DX)
    DX.sub_(Z).mul_(SC)
    return loss


def mse():
    loss = A.mse_loss(X, Z, SUM)
    A.mse_loss_backward.grad_input(GSC, X, Z, SUM, grad_input=DX)
    return loss


# name (as in bench_kernels), explicit bytes per element (bench_kernels'), call
K = [
    ("sigmoid_fwd", 8, lambda: torch.sigmoid(X, out=Y)),
    ("sigmoid_bwd", 12, lambda: A.sigmoid_backward.grad_input(Z, SOFTMAX_Y.view(-1), grad_input=DX)),
    ("tanh_fwd", 8, lambda: torch.tanh(X, out=Y)),
    ("tanh_bwd", 12, lambda: A.tanh_backward.grad_input(Z, SOFTMAX_Y.view(-1), grad_input=DX)),
    ("gelu_fwd", 8, lambda: A.gelu.out(X, approximate="none", out=Y)),
    ("gelu_bwd", 12, lambda: A.gelu_backward.grad_input(Z, X, approximate="none", grad_input=DX)),
    ("gelu_tanh_fwd", 8, lambda: A.gelu.out(X, approximate="tanh", out=Y)),
    ("gelu_tanh_bwd", 12, lambda: A.gelu_backward.grad_input(Z, X, approximate="tanh", grad_input=DX)),
    ("exp", 8, lambda: torch.exp(X, out=Y)),
    ("log", 8, lambda: torch.log(XP, out=Y)),
    ("softmax_row", 8, lambda: A._softmax.out(X2, 1, False, out=Y2)),
    ("log_softmax_row", 8, lambda: A._log_softmax.out(X2, 1, False, out=Y2)),
    ("softmax_bwd_row", 12, lambda: A._softmax_backward_data.out(Z2, SOFTMAX_Y, 1, F32, grad_input=DX2)),
    ("log_softmax_bwd_row", 12, lambda: A._log_softmax_backward_data.out(Z2, LOGSOFTMAX_Y, 1, F32, out=DX2)),
    ("sparse_xent_row", 8, sparse_xent),
    ("xent_row", 12, xent),
    ("sigmoid_xent", 12, sigmoid_xent),
    ("mse", 12, mse),
    ("sum", 4, lambda: torch.sum(X)),
    ("sumsq", 4, lambda: torch.dot(X, X)),
]
only = set(a.only.split(",")) if a.only else None
clock = time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter


def timed(f):
    t0 = clock()
    f()
    return clock() - t0


def inplace():
    Y.add_(X, alpha=1e-6)


with torch.no_grad():
    for name, nbytes, f in K:
        if only and name not in only:
            continue
        f()
        ts, ratios = [], []
        for _ in range(a.repeats):
            ti = timed(inplace)
            t = timed(f)
            ts.append(t)
            ratios.append((nbytes / t) / (12 / ti))
        med = statistics.median(ts)
        print(json.dumps({"bench": "torch_kernels", "name": name, "torch": torch.__version__, "capability": CAP,
                          "threads": torch.get_num_threads(), "n": N, "row": ROW, "bytes_per_elem": nbytes,
                          "median_s": med, "min_s": min(ts), "gbs": nbytes * N / med * 1e-9,
                          "ratio_inplace": statistics.median(ratios)}), flush=True)
