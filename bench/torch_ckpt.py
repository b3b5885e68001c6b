#!/usr/bin/python3
"""PyTorch peer of bench/bench_ckpt: torch.save (+ flush + fsync) and torch.load
of the same tensor set (MLP-like, 26.8 M float32 = 107.3 MB; --small divides
the large dimensions by 16), median over rounds. Prints one JSON object on one line.

    /usr/bin/python3 bench/torch_ckpt.py [--dir D] [--rounds R] [--small] [--threads T]

Per round:
  torch_save_fsync   open + torch.save(state_dict, f) + f.flush() + os.fsync + close
  torch_load         sd = torch.load(path): the previous result is still alive
                     while the new one loads (what `sd = torch.load(p)` does),
                     so the load gets fresh memory
  torch_load_reuse   del sd, then torch.load: the allocator may hand back the
                     memory the previous result used (already touched)
The file is removed before each save (not timed). MB are 10^6 bytes of tensor
data. Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time

import torch


def tensor_set(small):
    d = 16 if small else 1
    dims = [(784, 4096 // d), (4096 // d, 4096), (4096, 1664 // d), (1664 // d, 10)]
    shapes = {}
    for i, (a, b) in enumerate(dims):
        shapes[f"dense{i}/kernel"] = (a, b)
        shapes[f"dense{i}/bias"] = (b,)
    return shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    base = a.dir or os.environ.get("TMPDIR") or "."
    work = tempfile.mkdtemp(prefix="torch_ckpt.", dir=base)
    path = os.path.join(work, "model.pt")

    g = torch.Generator().manual_seed(1)
    sd = {k: torch.randn(s, generator=g, dtype=torch.float32) for k, s in tensor_set(a.small).items()}
    nbytes = sum(t.numel() * t.element_size() for t in sd.values())
    mb = nbytes / 1e6

    def save():
        with open(path, "wb") as f:
            torch.save(sd, f)
            f.flush()
            os.fsync(f.fileno())

    # Warm-up, and a check that what is timed is right.
    save()
    back = torch.load(path)
    assert all(torch.equal(back[k], sd[k]) for k in sd), "torch.load returned other values"
    file_bytes = os.path.getsize(path)

    t_save, t_load, t_reuse = [], [], []
    loaded = back
    for _ in range(a.rounds):
        os.unlink(path)
        t0 = time.perf_counter()
        save()
        t_save.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        loaded = torch.load(path)  # the previous `loaded` is alive until this returns
        t_load.append(time.perf_counter() - t0)
        del loaded
        t0 = time.perf_counter()
        loaded = torch.load(path)
        t_reuse.append(time.perf_counter() - t0)
    del loaded, back
    shutil.rmtree(work, ignore_errors=True)

    def mbps(ts):
        return [mb / t for t in ts]

    series = {"torch_save_fsync": mbps(t_save), "torch_load": mbps(t_load), "torch_load_reuse": mbps(t_reuse)}
    out = {
        "bench": "ckpt_io_torch",
        "context": {
            "torch": torch.__version__,
            "python": platform.python_version(),
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "dir": work,
        "tensors": len(sd),
        "dtype": "f32",
        "mb": round(mb, 2),
        "file_bytes": file_bytes,
        "rounds": a.rounds,
        "unit": "MB/s (1e6 bytes of tensor data per second)",
    }
    for k, v in series.items():
        out[k + "_mbps_median"] = round(statistics.median(v))
    out["per_round_mbps"] = {k: [round(x) for x in v] for k, v in series.items()}
    print(json.dumps(out))  # one line: JSON Lines, like every bench output


if __name__ == "__main__":
    main()
