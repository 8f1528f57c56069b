"""`moesim design` (the 1T question) and `moesim plan accounting | memory | layouts`.

The lead's CLI wrapper turns ConfigError into one line and exit status 2; these commands
also do it themselves (:func:`_one_line`) so they behave the same when used alone.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import fields
from functools import wraps
from pathlib import Path
from typing import Any

import click

from moesim.cli.files import check_flag_count, check_outputs, emit, output_file
from moesim.cli.progress import Ticker, quiet_option
from moesim.errors import ConfigError, MoesimError


def _one_line(fn: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from moesim.topologies import TopologyError

        try:
            return fn(*args, **kwargs)
        except (MoesimError, TopologyError) as exc:
            click.echo(f"moesim: {exc}", err=True)
            sys.exit(2)

    return wrapper


SPEC_OPTIONS: dict[str, str | None] = {
    "--model": "Preset name or path to a Hugging Face config.json.",
    "--gpus": "Pin the GPU count, whole hosts (8) or NVL72 racks (72) (default: size the "
              "cluster for the goal).",
    "--gpu": "H100, H200, B200 (HGX hosts of 8) or GB200 (NVL72 racks).",
    "--fabric": "auto (a rail fat tree, or NVL72 racks, built for the count), a preset name, "
                "or a topology YAML file (builder + params).",
    "--nic-gbit": "NIC line rate for --fabric auto (200, 400, 800).",
    "--oversubscription": "Leaf down:up bandwidth for --fabric auto.",
    "--tokens": "Training tokens.",
    "--days": "Target days to train.",
    "--gpu-budget": "Size the cluster to this many GPUs instead of the days target.",
    "--seq-len": None,
    "--global-batch": "Sequences per step (each layout takes the nearest divisible).",
    "--simulate-min": "Candidates simulated at least (best by estimate).",
    "--simulate-max": "Candidates simulated at most.",
    "--routing-draws": "Distinct router draws in fast mode (0: every MoE layer).",
    "--max-tp": "Search tensor parallelism up to this degree (and the NVLink domain).",
    "--max-cp": "Search context parallelism up to this degree (1 or 2).",
    "--prices": "YAML file overriding the bill of materials' price table.",
}
"""The design question's flags and their help; each flag's type and default are those of the
:class:`moesim.plan.spec.DesignSpec` field it sets (``--seq-len`` -> ``seq_len``), so the
command and the Python API cannot disagree on a default."""
SPEC_KEYS = (*(flag[2:].replace("-", "_") for flag in SPEC_OPTIONS), "extrapolate")


def _spec_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    from moesim.plan.spec import DesignSpec

    defaults = {f.name: f.default for f in fields(DesignSpec)}
    for flag, help_ in reversed(SPEC_OPTIONS.items()):
        default = defaults[flag[2:].replace("-", "_")]
        kind = (click.Path(dir_okay=False) if flag == "--prices"
                else int if default is None else type(default))
        fn = click.option(flag, type=kind, default=default, show_default=default is not None,
                          help=help_)(fn)
    return click.option(  # DesignSpec.extrapolate, as a flag that turns it off
        "--exact-steps", "extrapolate", flag_value=False, default=True,
        help="Simulate every micro-batch of each candidate instead of extending two short "
             "runs (moesim.plan.extrapolate, 0.5 % bound).")(fn)


def _spec(**kw: Any) -> Any:
    from moesim.plan.spec import DesignSpec

    return DesignSpec(**{k: kw[k] for k in SPEC_KEYS})


def _write_outputs(out: str, rec: dict[str, Any], markdown: str) -> list[Path]:
    """The Markdown at ``out``, the JSON record and the breakdown PNG beside it; for an
    ``.html`` ``out``, one self-contained HTML report (figures inside) and the JSON record.
    Each is written whole (temporary file, then rename)."""
    from moesim.io import write_atomic
    from moesim.plots.design import draw_design

    md, js, *figure = _outputs(out)
    if not figure:
        from moesim.plots.html_report import write_html_report

        write_atomic(js, json.dumps(rec, indent=2) + "\n", "--out")
        with output_file("--out", md) as tmp:
            write_html_report(rec, tmp, markdown)
        return [md, js]
    write_atomic(md, markdown, "--out")
    write_atomic(js, json.dumps(rec, indent=2) + "\n", "--out")
    with output_file("--out", figure[0]) as tmp:
        draw_design(rec, tmp)
    return [md, js, figure[0]]


def _outputs(out: str) -> list[Path]:
    """The report, the JSON record and the figure ``--out`` writes (no figure file beside an
    HTML report: its figures are inside it)."""
    md = Path(out)
    if md.suffix.lower() in (".html", ".htm"):
        return [md, md.with_suffix(".json")]
    return [md, md.with_suffix(".json"), md.with_suffix(".png")]


@click.command()
@_spec_options
@click.option("-j", "--jobs", type=int, default=lambda: os.cpu_count() or 1,
              show_default="all cores",
              help="Local worker processes for the simulated candidates.")
@click.option("--dask", "dask_address", default=None,
              help="Run the simulated candidates on a Dask scheduler at this address.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the Markdown report here, the JSON record and the breakdown "
                   "figure (PNG) beside it; a .html path gets one self-contained HTML report "
                   "(tables and figures inside, readable offline) and the JSON record.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON record instead.")
@quiet_option
@_one_line
def design(out: str | None, as_json: bool, jobs: int, dask_address: str | None, quiet: bool,
           **kw: Any) -> None:
    """Size a training cluster, choose and map its parallel layout by simulated steps
    (defaults: 1T MoE, 15T tokens in 60 days on H200). Progress on stderr (a terminal)."""
    from moesim.plan.design import design as run_design
    from moesim.plan.record import to_record
    from moesim.plan.report import to_markdown

    spec = _spec(**kw)
    if out:
        check_outputs(dict(zip(("--out", "--out record", "--out figure"), _outputs(out),
                               strict=False)),
                      [kw["model"]] if Path(kw["model"]).exists() else [])
    with Ticker("design", quiet=quiet) as bar:
        res = run_design(spec, jobs=jobs, dask=dask_address, say=bar.stage)
    rec = to_record(res)
    markdown = to_markdown(rec)
    if out:
        emit("\n".join(f"wrote {p}" for p in _outputs(out)),
             [lambda: _write_outputs(out, rec, markdown)])
    else:
        click.echo(json.dumps(rec, indent=2) if as_json else markdown)


@click.group()
def plan() -> None:
    """The pieces of `design` alone: accounting, memory of one layout, layout ranking."""


@plan.command()
@click.option("--model", default="moe-1t", show_default=True)
@click.option("--seq-len", type=int, default=4096, show_default=True)
@_one_line
def accounting(model: str, seq_len: int) -> None:
    """Total versus active parameters by part, and FLOPs per token."""
    from dataclasses import asdict

    from moesim.io import check_limit
    from moesim.model import flops_per_token, param_counts
    from moesim.plan.prepare import load_model

    check_limit("seq_len", seq_len, "seq_len")
    if seq_len < 1:
        raise ConfigError("seq_len", f"must be a positive integer, got {seq_len}")
    cfg = load_model(model)
    c = param_counts(cfg)
    f = flops_per_token(cfg, seq_len)
    click.echo(f"{cfg.name}: total {c.total / 1e9:.2f}B (+MTP {c.mtp / 1e9:.2f}B), active "
               f"{c.active / 1e9:.2f}B per token")
    for part, total in asdict(c.all).items():
        click.echo(f"  {part:16s} total {total / 1e9:9.3f}B  active "
                   f"{getattr(c.per_token, part) / 1e9:8.3f}B")
    click.echo(f"forward FLOPs per token at seq {seq_len}: {f.total / 1e9:.1f} GFLOP; "
               f"training {3 * f.total / 1e9:.1f} GFLOP")


@plan.command()
@click.option("--model", default="moe-1t", show_default=True)
@click.option("--gpu", default="H200", show_default=True)
@click.option("--tp", type=int, default=1)
@click.option("--pp", type=int, default=1)
@click.option("--vpp", type=int, default=1)
@click.option("--ep", type=int, default=1)
@click.option("--etp", type=int, default=1)
@click.option("--cp", type=int, default=1)
@click.option("--dp", type=int, default=1)
@click.option("--seq-len", type=int, default=4096, show_default=True)
@click.option("--global-batch", type=int, default=16384, show_default=True)
@_one_line
def memory(model: str, gpu: str, seq_len: int, global_batch: int, **degrees: int) -> None:
    """Per-GPU state budget of one layout (selective, then full recompute)."""
    from moesim.hardware import get_gpu
    from moesim.parallel.layout import ParallelLayout
    from moesim.plan.candidates import check_layout
    from moesim.plan.prepare import load_model
    from moesim.plan.spec import DesignSpec

    for name, degree in degrees.items():
        check_flag_count(degree, "gpus", f"layout.{name}")
    layout = ParallelLayout.of(degrees)
    cfg = load_model(model)
    layout.validate(cfg)  # an impossible layout is bad input (exit 2), not a "does not fit"
    spec = DesignSpec(model=model, gpus=layout.world_size, gpu=gpu, seq_len=seq_len,
                      global_batch=global_batch)
    cand = check_layout(spec, cfg, get_gpu(gpu), layout)
    click.echo(f"{cand.name}: {'fits' if cand.fits else 'does not fit'}"
               + (f" ({cand.recompute} recompute, {cand.num_microbatches} micro-batches)"
                  if cand.fits else f": {cand.reason}"))
    b = cand.memory
    if b is not None:
        for part in ("weights", "grads", "optimizer", "activations", "buffers", "total"):
            click.echo(f"  {part:12s} {getattr(b, part + '_gib'):8.2f} GiB")


@plan.command()
@_spec_options
@quiet_option
@_one_line
def layouts(quiet: bool, **kw: Any) -> None:
    """Rank the layouts of a GPU count by estimate (no simulation): what design prunes."""
    from moesim.hardware import get_gpu
    from moesim.plan.prepare import load_model, prepare

    spec = _spec(**kw)
    if spec.gpus is None:
        raise click.UsageError("plan layouts needs --gpus")
    prep = prepare(spec, load_model(spec.model), get_gpu(spec.gpu), spec.gpus)
    click.echo(f"{len(prep.ranked)} of {len(prep.candidates)} layouts fit; by estimate:")
    for r in prep.ranked[:20]:
        click.echo(f"  {r.cand.name:40s} {r.cand.recompute:9s} gbs {r.cand.global_batch:6d} "
                   f"est {r.est.step_time_s:7.2f} s")
