#!/usr/bin/python3
"""The PyTorch peer of bench_mlp_step: one training step of a 784-1024-1024-10
MLP (ReLU, softmax cross-entropy, Adam), batch 256, float32, on the CPU, with
the same rounds x steps timing and median. Prints JSON. Run with Debian's
python3-torch: /usr/bin/python3 bench/torch_mlp_step.py [--threads T] [--mode M]
--mode adam (default) | sgd (plain SGD, lr 0.01) | infer (forward under no_grad).
--autocast bf16: the forward (and so the backward) under
torch.autocast("cpu", dtype=torch.bfloat16), PyTorch's mixed precision: the
matmuls run in bf16 (their outputs bf16), the parameters and Adam stay fp32."""
import contextlib
import argparse, json, os, statistics, time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--threads", type=int, default=0)
ap.add_argument("--mode", choices=("adam", "sgd", "infer"), default="adam")
ap.add_argument("--autocast", choices=("none", "bf16"), default="none")
a = ap.parse_args()
if a.threads > 0:
    torch.set_num_threads(a.threads)
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                            torch.nn.ReLU(), torch.nn.Linear(1024, 10))
opt = (torch.optim.SGD(model.parameters(), lr=1e-2) if a.mode == "sgd" else
       torch.optim.Adam(model.parameters(), lr=1e-3))
x = torch.rand(a.batch, 784) - 0.5
y = torch.arange(a.batch) % 10
lossf = torch.nn.CrossEntropyLoss()


def cast():
    if a.autocast == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def step():
    opt.zero_grad(set_to_none=False)
    with cast():
        loss = lossf(model(x), y)
    loss.backward()
    opt.step()
    return loss


def infer():
    with torch.no_grad(), cast():
        return model(x)[0, 0]


if a.mode == "infer":
    step = infer  # noqa: F811


# BENCH_CLOCK=cpu: this process's CPU time, as bench_common.c's bench_now
clock = time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter
for _ in range(3):
    step()
times = []
for _ in range(a.rounds):
    t0 = clock()
    for _ in range(a.steps):
        loss = step()
    times.append((clock() - t0) / a.steps)
print(json.dumps({"bench": "torch_mlp_step", "mode": a.mode, "autocast": a.autocast, "torch": torch.__version__, "threads": torch.get_num_threads(),
                  "batch": a.batch, "rounds": a.rounds, "steps_per_round": a.steps,
                  "step_ms_median": round(1e3 * statistics.median(times), 3),
                  "step_ms_min": round(1e3 * min(times), 3), "last_loss": float(loss)}, indent=2))
