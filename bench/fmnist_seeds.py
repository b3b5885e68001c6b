#!/usr/bin/env python3
"""bench/fmnist-seeds.sh's second half: the demo's step time in each
precision (CPU time, the precisions interleaved), then the records of the
runs of fmnist-seeds.sh (one per precision and seed), the per-precision
distributions and the bf16/f32 ratios. JSON Lines on stdout, the table on
stderr.

  fmnist_seeds.py OUT THRESHOLD EVERY "SEEDS" "PRECISIONS" FMNIST REPEATS [BENCH_MLP_STEP]

The step time of the demo is measured on the demo itself: per round and
precision, `cairn-fmnist train` for one epoch and for six (938 and 5628
steps, an evaluation every epoch and the default checkpoints, as
bench/compare-fmnist.sh runs it), in the process's CPU time (user + sys);
the difference over the 4690 steps between them is the cost of a step with
its share of the evaluations and checkpoints, without the data loading. The
time to the threshold is then steps x that cost: the steps do not depend on
the machine's load, and CPU time at one thread depends on it less than the
wall clock does, but not nothing (a program on the other hyperthread of the
core slows it): the ratio is taken per round, of the two precisions run
one after the other, and its quartiles reported."""
import json, os, re, statistics as st, subprocess, sys, tempfile

out, thr, every = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
seeds, precs, fm, repeats = sys.argv[4].split(), sys.argv[5].split(), sys.argv[6], int(sys.argv[7])
bench = sys.argv[8] if len(sys.argv) > 8 else ""
EPOCH = 938
BIG = 10 ** 9  # a run that never reached the threshold: later than any other


def quart(v):
    v = sorted(v)
    if len(v) < 2:
        return [v[0]] * 3 if v else [None] * 3
    return [round(x, 4) for x in st.quantiles(v, n=4, method="inclusive")]


def cpu_run(args):
    """user + sys seconds of one run of the demo"""
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    if status != 0:
        sys.exit("fmnist-seeds: %s failed:\n%s" % (" ".join(args), err))
    return ru.ru_utime + ru.ru_stime


def step_times():
    """per precision, the CPU seconds of a demo step in each round"""
    t = {p: [] for p in precs}
    with tempfile.TemporaryDirectory(prefix="fmnist-seeds-time.") as d:
        for r in range(repeats):
            for p in precs:
                cost = []
                for steps in (EPOCH, 6 * EPOCH):
                    ck = "%s/%s-%d-%d" % (d, p, r, steps)
                    cost.append(cpu_run([fm, "train", "--checkpoint-dir", ck, "--threads", "1", "--batch-size", "64",
                                         "--max-steps", str(steps), "--eval-every", str(EPOCH), "--seed", "1",
                                         "--precision", p]))
                t[p].append((cost[1] - cost[0]) / (5 * EPOCH))
    return t


def load_runs():
    runs = {}
    for p in precs:
        for s in seeds:
            ev = []
            for line in open("%s/run-%s-%s/out.txt" % (out, p, s)):
                m = re.match(r"step (\d+)\s+test_loss=(\S+)\s+test_accuracy=([0-9.]+)\s+\(([0-9.]+) s\)", line)
                if m:
                    ev.append((int(m.group(1)), float(m.group(3)), float(m.group(2)), float(m.group(4))))
            first = next((e for e in ev if e[1] >= thr), None)
            first_ep = next((e for e in ev if e[0] % EPOCH == 0 and e[1] >= thr), None)
            epochs = [e for e in ev if e[0] % EPOCH == 0]
            runs[(p, s)] = {"suite": "fmnist-seeds", "precision": p, "seed": int(s), "threshold": thr,
                            "first_step": first[0] if first else None,
                            "first_epoch_step": first_ep[0] if first_ep else None,
                            "final_accuracy": ev[-1][1], "final_loss": ev[-1][2],
                            "last5_epochs_mean": round(st.mean(e[1] for e in epochs[-5:]), 4),
                            "evals": [[e[0], e[1], e[2]] for e in ev]}
    return runs


def mean_diff(runs, key, lo):
    """bf16 - f32, per seed the mean over the evaluations from step lo on; mean and standard error over seeds"""
    d = []
    for s in seeds:
        a, b = runs[("f32", s)]["evals"], runs[("bf16", s)]["evals"]
        d.append(st.mean(y[key] - x[key] for x, y in zip(a, b) if x[0] >= lo))
    return round(st.mean(d), 5), round(st.stdev(d) / len(d) ** 0.5, 5) if len(d) > 1 else None


def summarize(runs, times):
    log = lambda *a: print(*a, file=sys.stderr)
    log("\n-- steps to the first evaluation >= %.3f (evaluations every %d steps; an epoch is %d), %d seeds"
        % (thr, every, EPOCH, len(seeds)))
    log("%-6s %24s %24s %12s %9s %6s" % ("", "first eval (q1 med q3)", "first epoch (q1 med q3)", "step ms (med)",
                                         "final", "never"))
    med_step = {}
    for p in precs:
        rs = [runs[(p, s)] for s in seeds]
        rec = {"suite": "fmnist-seeds", "summary": p, "seeds": len(rs),
               "first_step_quartiles": quart([r["first_step"] or BIG for r in rs]),
               "first_epoch_step_quartiles": quart([r["first_epoch_step"] or BIG for r in rs]),
               "final_accuracy_mean": round(st.mean(r["final_accuracy"] for r in rs), 4),
               "final_accuracy_quartiles": quart([r["final_accuracy"] for r in rs]),
               "last5_epochs_mean": round(st.mean(r["last5_epochs_mean"] for r in rs), 4),
               "never": sum(1 for r in rs if r["first_epoch_step"] is None)}
        if times:
            rec["step_cpu_ms_quartiles"] = quart([1e3 * x for x in times[p]])
            med_step[p] = st.median(times[p])
        print(json.dumps(rec))
        log("%-6s %24s %24s %12s %9.4f %6d" % (p, " ".join("%d" % x for x in rec["first_step_quartiles"]),
            " ".join("%d" % x for x in rec["first_epoch_step_quartiles"]),
            "%.4f" % (1e3 * med_step[p]) if times else "-", rec["final_accuracy_mean"], rec["never"]))
    if not ("f32" in precs and "bf16" in precs):
        return
    fe = lambda p, s: runs[(p, s)]["first_epoch_step"] or BIG
    sr = [fe("bf16", s) / fe("f32", s) for s in seeds]
    med = {p: st.median(fe(p, s) for s in seeds) for p in ("f32", "bf16")}
    rec = {"suite": "fmnist-seeds", "summary": "bf16/f32", "seeds": len(seeds),
           "steps_ratio_per_seed_quartiles": quart(sr), "steps_ratio_of_medians": round(med["bf16"] / med["f32"], 4),
           "bf16_earlier_same_later": [sum(x < 1 for x in sr), sum(x == 1 for x in sr), sum(x > 1 for x in sr)],
           "final_accuracy_diff_mean": round(st.mean(runs[("bf16", s)]["final_accuracy"] -
                                                     runs[("f32", s)]["final_accuracy"] for s in seeds), 4),
           "accuracy_diff_every_eval": mean_diff(runs, 1, 0), "loss_diff_every_eval": mean_diff(runs, 2, 0)}
    log("bf16/f32, paired by seed: steps to it (q1 med q3) %s, earlier/same/later %s, ratio of the medians %.3f"
        % (" ".join("%.3f" % x for x in rec["steps_ratio_per_seed_quartiles"]), rec["bf16_earlier_same_later"],
           rec["steps_ratio_of_medians"]))
    log("  test accuracy bf16 - f32: final %+.4f (mean); every evaluation %+.5f (standard error %.5f); test loss %+.5f (%.5f)"
        % (rec["final_accuracy_diff_mean"], *rec["accuracy_diff_every_eval"], *rec["loss_diff_every_eval"]))
    if times:
        rr = [b / f for b, f in zip(times["bf16"], times["f32"])]
        q = quart(rr)
        rec["step_time_ratio_quartiles"] = q
        rec["time_ratio_per_seed_quartiles"] = [round(x * q[1], 4) for x in rec["steps_ratio_per_seed_quartiles"]]
        rec["time_ratio_of_medians"] = round(rec["steps_ratio_of_medians"] * q[1], 4)
        log("  step time (CPU, the demo's, interleaved, %d rounds) bf16/f32 (q1 med q3) %s" % (repeats, " ".join("%.3f" % x for x in q)))
        log("  time to it = steps x step time: per seed (q1 med q3) %s; ratio of the medians %.3f"
            % (" ".join("%.3f" % x for x in rec["time_ratio_per_seed_quartiles"]), rec["time_ratio_of_medians"]))
    if bench and times:
        j = json.loads(subprocess.run([bench, "--sizes", "784,256,128,10", "--batch", "64", "--threads", "1",
                                       "--rounds", str(max(repeats, 3)), "--steps", "300", "--compare-bf16",
                                       "--cpu-time"], check=True, capture_output=True, text=True).stdout)
        rec["model_step_ms"] = {"f32": j["step_ms_median"], "bf16": j["bf16_step_ms_median"]}
        rec["model_step_ratio_quartiles"] = j["bf16_over_f32_quartiles"]
        log("  the model's step alone (bench_mlp_step, CPU): %.4f / %.4f ms, bf16/f32 (q1 med q3) %s"
            % (j["bf16_step_ms_median"], j["step_ms_median"], " ".join("%.3f" % x for x in j["bf16_over_f32_quartiles"])))
    print(json.dumps(rec))


runs = load_runs()
for k in sorted(runs, key=lambda k: (k[0], int(k[1]))):
    print(json.dumps(runs[k]))
times = step_times() if repeats > 0 else None
summarize(runs, times)
