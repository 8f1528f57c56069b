"""Wall time of one simulated 1T-class training step, full mode and fast mode.

Commands (documented in the fast-mode docstring, :mod:`moesim.step.fast`)::

    .venv/bin/python benchmarks/bench_step.py --mode fast --gpus 9216 --repeats 5
    .venv/bin/python benchmarks/bench_step.py --cli --repeats 5   # whole `moesim step`
    .venv/bin/python benchmarks/bench_step.py --shape simai --routing-draws 0 --repeats 3
    .venv/bin/python benchmarks/bench_step.py --mode full --gpus 1024 --max-wall-s 300

``--cli`` writes the fast step below as a scenario and times whole ``moesim step`` processes
(import, scenario, fabric, every MoE layer routed, report). What it measures about bytecode:
it runs ``python -m moesim.cli`` with this process's environment, and this machine sets
``PYTHONDONTWRITEBYTECODE=1``, so every timed process compiles moesim's ~155 modules from
source (0.1-0.2 s); ``--pyc`` first warms a private cache (``PYTHONPYCACHEPREFIX``, one untimed
run), as a regular install has (pip compiles at install; an editable install writes
``__pycache__`` on its first run where that variable is unset). ``--shape simai`` runs SimAI's
bundled example layout instead (:func:`simai_spec`). Each line prints wall and CPU seconds
(CPU of every process, the routing child included): on the shared machine the CPU time is
the steadier of the two.

The step: ``moe-1t`` (Kimi K2 shape: 61 layers, 384 experts, top-8), DeepSeek-like layout
PP16, EP64 across hosts, TP1, ZeRO-1 DP (the distributed optimizer the step models), 1F1B,
sequences of 4096 tokens, micro-batch 1, ``--global-batch`` sequences (default 16384, Kimi
K2's 67M-token batch) rounded down to a multiple of dp; H800 HGX hosts on a rail-optimized
3-tier fat tree (``rail-h200-4096`` preset re-sized to ``gpus / 8`` hosts), D-mod-K routing,
2 % finish batching. ``--microbatches`` overrides the count (full mode needs few).
Each repeat is a cold run (fabric, plan and routes rebuilt). ``--max-wall-s`` stops the
full-mode run (SIGALRM) and reports how far it got.

Measured on the 2-core dev machine. Its speed moves by about 2x through a day, so compare
runs made back to back, not across the notes below.

* fast, 9,216 GPUs (1,152 hosts, dp 576, 28 micro-batches), ``--routing-draws 1`` (default),
  2026-12-03 (step 9.171 s, MFU 0.162: GEMMs and attention at the sustained, power-limited
  rate, moesim.calibration.sustained_fraction). Three back-to-back pairs against the code of that
  morning (cbd4a32: step 8.621 s, burst GEMM rate): medians of 5 were 1.22 s -> 0.86 s,
  1.22 -> 0.83 and 1.22 -> 0.82, a ratio of 0.68; at 07:46, in a slower hour, 2.18 -> 1.62
  and 1.80 -> 1.39 (0.75-0.77). The same cbd4a32 gave 2.69 s at 06:33 that day on the same
  machine. Current code over the day: medians 0.82 to 1.88 s. Two changes did it:
  - fast mode runs each MoE layer as one timeout, 27 k -> 9 k SimPy events
    (moesim.step.program._fused_moe);
  - a pipeline send that starts on an idle network is timed in closed form, 841 -> 3 rate
    solves (moesim.engine.solo).
  ``--routing-draws 4``: 2.3 s, step 8.554 s; ``0`` (all 60 MoE layers drawn, as full mode):
  22.6 s, step 8.544 s (both measured earlier, on the older code). So reusing one draw moves
  the step time by 0.1 %.
* fast, 9,216 GPUs, every MoE layer routed, 2026-12-03 14:5x at load ~10 (wall ~3x CPU):
  ``--cli`` median of 5 12.11 s wall, 3.7-4.2 s CPU, max RSS 176 MB, step 10484.1 ms.
  Back to back against 2eb61f5 (before route_tokens and layer_costs were vectorised, same step
  bit for bit), ``--routing-draws 0 --repeats 1`` as a whole process, 3 pairs: 32.6 / 31.0 /
  32.7 s -> 11.8 / 11.8 / 11.8 s wall, 8.5-8.7 -> 3.6-3.7 s user CPU, max RSS 191 -> 172 MB.
  Of the ~3.7 s CPU: routing 60 layers ~1.8 s (29 ms each; 11 ms of it the random draws),
  the SimPy run ~0.9 s, imports ~0.5 s, fabric + routers ~0.2 s.
  15:35-15:48 at load ~7-8, back to back against 22e446a (same step, JSON sha1 equal):
  ``--cli`` CPU median 3.82 -> 3.41 s (wall 9.80 -> 8.69 s); with the lazy CLI 3.31-3.37 s CPU,
  8.5-9.1 s wall, max RSS 173 MB. Pieces: destinations by division, the all-to-all bound's
  row-by-row drain, per-rank pair counts, lazily loaded CLI commands. Routing is now ~24 ms a
  layer (draws 7.8, first-round dedup of candidates 7.5, pair counts 3.7, per-rank dedup 3.1).
  This machine sets PYTHONDONTWRITEBYTECODE=1, so each process compiles moesim's modules:
  with a bytecode cache (``PYTHONPYCACHEPREFIX``, warmed once) 3.19 s CPU against 3.31 s.
* ``--cli``, session 14 (2026-12-03): 3.18 s wall, 3.10 s CPU (median of 5, idle, 17:10)
  before; then fabrics built into link arrays without networkx (2.72 s CPU at load 6.5), host
  routers / all-to-all timers built in a worker thread; routing in two threads
  (``--routing-threads 2``): 0.95x the wall at 1.15x the CPU, idle (off by default);
  benchmarks/README.md.
  ``--pyc`` times with a bytecode cache (this machine sets PYTHONDONTWRITEBYTECODE=1).
* whole ``moesim step``, session 15 (2026-12-04 00:0x, under ``chrt -f 1`` because the machine
  was loaded all session; 3 interleaved rounds): main 28ee7c1 4.13-4.56 s wall; int16
  candidates, one worker drawing layers ahead, 147 instead of 169 modules imported: 3.12-3.22 s
  (0.74x), 188-198 MB peak; benchmarks/README.md.
* whole ``moesim step``, session 16 (2026-12-04 04:29, ``chrt -f 1``, load 7): the uniform
  router draws each layer's counts directly (moesim.router.exchangeable): main d08fa5f
  2.12 / 2.10 s -> 1.81 / 1.85 s (CPU 3.04-3.08 -> 2.24-2.30 s), peak 193-197 -> 157 MiB;
  benchmarks/README.md.
* whole ``moesim step``, session 17 (2026-12-04 09:14-09:17, the lead's quiet window, ``chrt``):
  two routing workers, glibc keeping freed memory (moesim.cli.memory), per-rank state made when
  read: main 43e8dcd 2.05-2.42 s -> 1.78-2.09 s (medians), ``--pyc`` 1.64-1.69 s, peak 156-159
  MiB; ``--shape simai --routing-draws 0 --repeats 3`` median 5.41 s, step 6.323 s. The step is
  GIL-bound; benchmarks/README.md.
* whole ``moesim step``, session 18 (2026-12-07 22:0x-22:1x, ``chrt -f 2``, load 6-10; every
  output bit-identical): the MoE layers are routed in a forked child process
  (moesim.step.routing_fork: the draws no longer share the step's GIL; counts packed through a
  1 MiB pipe), each rank's all-to-all arrival looked up once, A2ATimer's bound cheaper.
  Interleaved rounds against 047af0c (the code before): medians 1.83 -> 1.49 s (12 rounds,
  load 7.5-9), 2.09 -> 1.69 s (12 rounds, load 6-9); ``--cli --repeats 5`` 1.43 / 1.57 s
  (22:08) and 1.79 / 1.66 s (22:17, load 9-10) against 1.87 / 2.53 s; ``--pyc`` 1.61 / 1.67
  s. Peak RSS 148-151 MiB (the step's process) + 69 MiB (the routing child, Pss 55 MiB; most
  of it pages shared with the parent): ``peak RSS`` below prints the larger process only.
  ``--shape simai --routing-draws 0 --repeats 3``: median 6.27 s against 7.05 s (in-process
  ``cpu`` counts this process, not the routing child). benchmarks/README.md.
* ``--shape simai --routing-draws 0``, 9,216 GPUs (dp 384, 24 micro-batches, 96 layers),
  14:55 at load ~10: median of 3 23.78 s wall, step 6.097 s, max RSS 142 MB; 15:17 at load
  ~7: 14.34 s wall, 7.43 s CPU. Its time is the SimPy run and the interleaved schedule's
  pipeline-send rate solves, not routing.
* fast, 1,024 GPUs, ``--layers 16 --microbatches 4``, 2026-12-03 13:0x, load about 12: estimates
  (default) median of 3 10.99 s, step 1.391 s; ``--phases fabric`` (every group of a stage at
  once on the whole fabric, moesim.step.phased) 37.54 s (one run), step 1.415 s, top link
  h0/nic7->leaf.r7.su0 (1:1 fabric: +1.7 % over the estimates).
* full, 1,024 GPUs, ``--layers 16 --microbatches 1`` (15 MoE layers, about 1.2 M flows):
  98.5 s, step 1.176 s (fast mode on the same: 0.32 s wall, step 1.092 s, -7.1 %);
  2026-12-03, after the changes above. Earlier notes: 173-180 s, then 259 s (a slower hour of
  the machine, fp32 gradient reduce-scatters and in-order ring sends). Full mode grows with
  flows: about (MoE layers x micro-batches x 4 x ep(ep - 1) per EP group), plus the DP rings'
  ``(n - 1) n`` per item. The default step at 1,024 GPUs (61 layers, 16384 // 64 = 256
  micro-batches) therefore has about 1,000x the MoE layer passes of the 16-layer run: over a
  day, against the 5-minute target. No flow-level method gets there; it would take an
  all-to-all model that is not flows (as fast mode's estimate is).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from moesim.model import ModelConfig, get_model
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec, run_step
from moesim.step.mode import Fast

PP, EP = 16, 64
SIMAI_TP, SIMAI_EP, SIMAI_PP, SIMAI_VPP, SIMAI_GA = 2, 16, 12, 8, 24
"""SimAI's bundled analytical example (aliyun/SimAI ``example/workload_analytical.txt``,
commit 03613a7, header line: ``model_parallel_NPU_group: 2 ep: 16 pp: 12 vpp: 8 ga: 24
all_gpus: 9216``): TP2 EP16 PP12 VPP8, 24 gradient-accumulation micro-batches."""


def _model(layers: int | None) -> ModelConfig:
    """moe-1t cut to (or, past its 61, extended with MoE layers to) ``layers`` layers."""
    model = get_model("moe-1t")
    if not layers:
        return model
    extra = (True,) * max(0, layers - model.num_layers)
    return dataclasses.replace(model, num_layers=layers,
                               moe_layers=(model.moe_layers + extra)[:layers])


def _fabric(gpus: int, gpu: str) -> FabricSpec:
    return FabricSpec(preset="rail-h200-4096", params=(("hosts", gpus // 8), ("gpu", gpu)),
                      multipath="dmodk", batch_window_rel=0.02)


def make_spec(gpus: int, global_batch: int, microbatches: int | None, gpu: str,
              layers: int | None = None) -> StepSpec:
    """The benchmark step on ``gpus`` GPUs (module docstring); ``layers`` cuts the model to
    its first ``layers`` decoder layers (for timing smaller full-mode runs)."""
    dp = gpus // PP
    m = microbatches or max(1, global_batch // dp)
    return StepSpec(model=_model(layers), layout=ParallelLayout(pp=PP, ep=EP, dp=dp),
                    gpu=gpu, fabric=_fabric(gpus, gpu), microbatches=m, seq_len=4096)


def simai_spec(gpus: int, gpu: str, microbatches: int | None = None) -> StepSpec:
    """SimAI's example shape on ``gpus`` GPUs: TP2 EP16 PP12 VPP8 GA24, interleaved 1F1B.
    moe-1t's 61 layers cannot fill 12 x 8 virtual stages, so the model is moe-1t extended to
    96 layers (one per virtual stage; the extra 35 are MoE layers like its others)."""
    layout = ParallelLayout(tp=SIMAI_TP, pp=SIMAI_PP, vpp=SIMAI_VPP, ep=SIMAI_EP,
                            dp=gpus // (SIMAI_TP * SIMAI_PP))
    return StepSpec(model=_model(SIMAI_PP * SIMAI_VPP), layout=layout, gpu=gpu,
                    fabric=_fabric(gpus, gpu), microbatches=microbatches or SIMAI_GA,
                    seq_len=4096, schedule="interleaved")


SCENARIO = """version: 2
name: bench-step-{gpus}
description: benchmarks/bench_step.py's fast step as a scenario (moesim step, whole process)
seed: 0
mode: fast
model: moe-1t
hardware: {{gpu: {gpu}}}
fabric:
  preset: rail-h200-4096
  params: {{hosts: {hosts}, gpu: {gpu}}}
  multipath: dmodk
  batch_window_rel: 0.02
layout: {{tp: 1, pp: {pp}, ep: {ep}, dp: {dp}}}
schedule: 1f1b
workload: {{global_batch: {batch}, micro_batch_size: 1, seq_len: 4096}}
"""


CLI = ("import sys\nimport moesim.step.routing_ahead as ahead\n"
       "ahead.ROUTING_THREADS = {threads}\nfrom moesim.cli.main import main\n"
       "sys.argv = ['moesim', 'step', {path!r}, '-q']\nmain()\n")
"""``moesim step`` with ``--routing-threads`` workers drawing MoE layers ahead (0: none; the
CLI's own default is :data:`moesim.step.routing_ahead.ROUTING_THREADS`)."""


def time_cli(spec: StepSpec, gpus: int, gpu: str, repeats: int, threads: int | None = None,
             pyc: bool = False) -> None:
    """Time whole ``moesim step`` processes (import, scenario, fabric, every MoE layer routed,
    report) on ``spec`` written as a scenario; print each wall time and the median.
    ``threads``: routing workers (default: the CLI's). ``pyc``: with a bytecode cache, warmed
    by one untimed run, as an installed package has (this machine sets
    PYTHONDONTWRITEBYTECODE, so by default every process compiles moesim)."""
    text = SCENARIO.format(gpus=gpus, gpu=gpu, hosts=gpus // 8, pp=PP, ep=EP,
                           dp=spec.layout.dp, batch=spec.microbatches * spec.layout.dp)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(text)
        cmd = ([sys.executable, "-m", "moesim.cli", "step", str(path), "-q"] if threads is None
               else [sys.executable, "-c", CLI.format(threads=threads, path=str(path))])
        env = dict(os.environ)
        if pyc:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pyc")
            subprocess.run(cmd, check=True, capture_output=True, env=env)
        walls, cpus = [], []
        for _ in range(repeats):
            t0, c0 = time.perf_counter(), _children_cpu_s()
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
            walls.append(time.perf_counter() - t0)
            cpus.append(_children_cpu_s() - c0)
            step = next(line for line in out.splitlines() if "step time" in line)
            print(f"  whole process {walls[-1]:.2f} s  cpu {cpus[-1]:.2f} s  "
                  f"{' '.join(step.split())}")
    print(f"median {statistics.median(walls):.2f} s  min {min(walls):.2f} s  "
          f"cpu median {statistics.median(cpus):.2f} s  (moesim step{', bytecode cache' * pyc}"
          f"{'' if threads is None else f', {threads} routing threads'}; "
          f"load {os.getloadavg()[0]:.1f})  peak RSS {_children_peak_rss_mib():.0f} MiB")


def _children_peak_rss_mib() -> float:
    """The largest peak resident set of the finished child processes so far (MiB; Linux
    reports KiB)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _children_cpu_s() -> float:
    """User + system CPU seconds of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class WallCap(Exception):
    """A full-mode run hit ``--max-wall-s``."""


def _alarm(_sig: int, _frame: FrameType | None) -> None:
    raise WallCap


@contextmanager
def wall_cap(max_wall_s: float) -> Iterator[None]:
    """Raise :class:`WallCap` inside the block once ``max_wall_s`` of wall time has passed
    (SIGALRM); the timer is disarmed when the block ends either way."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, max_wall_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("fast", "full"), default="fast")
    ap.add_argument("--gpus", type=int, default=9216)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--global-batch", type=int, default=16384)
    ap.add_argument("--microbatches", type=int, default=None)
    ap.add_argument("--routing-draws", type=int, default=1,
                    help="fast mode: distinct routings reused cyclically (0 = every layer)")
    ap.add_argument("--phases", choices=("estimate", "fabric"), default="estimate",
                    help="fast mode: per-group estimates, or whole-fabric phases (phased.py)")
    ap.add_argument("--gpu", default="H800")
    ap.add_argument("--layers", type=int, default=None,
                    help="cut the model to its first N layers (N >= 16; scaling runs)")
    ap.add_argument("--max-wall-s", type=float, default=300.0)
    ap.add_argument("--shape", choices=("1t", "simai"), default="1t",
                    help="1t: the step of the module docstring; simai: SimAI's example layout "
                    "(TP2 EP16 PP12 VPP8 GA24, simai_spec)")
    ap.add_argument("--cli", action="store_true",
                    help="time whole `moesim step` processes on the 1t step as a scenario "
                    "(fast mode, every MoE layer routed) instead of run_step in this process")
    ap.add_argument("--routing-threads", type=int, default=None,
                    help="--cli: workers drawing MoE layers ahead, 0 = none (default: the "
                    "CLI's, moesim.step.routing_ahead.ROUTING_THREADS)")
    ap.add_argument("--pyc", action="store_true",
                    help="--cli: with a warmed bytecode cache (as an installed package)")
    args = ap.parse_args()
    if args.cli and (args.shape != "1t" or args.mode != "fast" or args.layers):
        ap.error("--cli times the default fast 1t step only")
    spec = (simai_spec(args.gpus, args.gpu, args.microbatches) if args.shape == "simai" else
            make_spec(args.gpus, args.global_batch, args.microbatches, args.gpu, args.layers))
    print(f"{args.mode}: {args.gpus} GPUs, {spec.layout}, {spec.microbatches} micro-batches, "
          f"{spec.model.num_layers} layers")
    if args.cli:
        time_cli(spec, args.gpus, args.gpu, args.repeats, args.routing_threads, args.pyc)
        return
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(args.repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        if args.mode == "fast":
            res = run_step(spec, Fast(routing_draws=args.routing_draws or None,
                                          phases=args.phases))
        else:
            try:
                with wall_cap(args.max_wall_s):
                    res = run_step(spec)
            except WallCap:
                print(f"full mode: stopped at --max-wall-s {args.max_wall_s:.0f} s")
                return
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        print(f"  wall {walls[-1]:.2f} s  cpu {cpus[-1]:.2f} s  step {res.step_time_s:.3f} s  "
              f"MFU {res.mfu:.3f}  "
              f"top link {res.top_link or '-'}  "
              + " ".join(f"{k}={v:.3f}" for k, v in res.breakdown_s.items() if v))
    print(f"median {statistics.median(walls):.2f} s  min {min(walls):.2f} s  "
          f"cpu median {statistics.median(cpus):.2f} s  ({dataclasses.asdict(spec.layout)})")


if __name__ == "__main__":
    main()
