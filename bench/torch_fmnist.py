#!/usr/bin/python3
"""PyTorch peer of `cairn-fmnist train` (bench/compare-fmnist.sh): the same
784-256-128-10 ReLU MLP, softmax cross-entropy, Adam lr 1e-3, batch 64,
pixels scaled to [0, 1], shuffled every epoch, on Debian's
dataset-fashion-mnist files. Prints one JSON object per epoch: epoch, the
cumulative training seconds (test evaluation excluded), test accuracy.

  torch_fmnist.py [--data-dir D] [--epochs N] [--batch B] [--threads T] [--seed S] [--flush-denormal]

--flush-denormal: torch.set_flush_denormal(True), what cairn's optimizers do
(and TF's executor); PyTorch's default keeps subnormals, which Intel CPUs
handle through slow microcode assists.
"""
import argparse, gzip, json, os, sys, time

import numpy as np
import torch


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--flush-denormal", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    torch.manual_seed(a.seed)
    d = a.data_dir
    xtr = torch.from_numpy(idx(os.path.join(d, "train-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255)
    ytr = torch.from_numpy(idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    xte = torch.from_numpy(idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255)
    yte = torch.from_numpy(idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                                torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    lossf = torch.nn.CrossEntropyLoss()
    n = xtr.shape[0]
    train_s = 0.0
    for epoch in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        perm = torch.randperm(n)
        model.train()
        for i in range(0, n, a.batch):
            j = perm[i:i + a.batch]
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(xtr[j]), ytr[j])
            loss.backward()
            opt.step()
        train_s += time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(json.dumps({"epoch": epoch, "train_s": round(train_s, 3), "test_accuracy": round(acc, 4)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
