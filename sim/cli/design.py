"""`moesim design` (the 1T question) and `moesim plan accounting | memory | layouts`.

The lead's CLI wrapper turns ConfigError into one line and exit status 2; these commands
also do it themselves (:func:`_one_line`) so they behave the same when used alone.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click

from moesim.cli.progress import Ticker, quiet_option
from moesim.errors import MoesimError


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


def _spec_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    opts = [
        click.option("--model", default="moe-1t", show_default=True,
                     help="Preset name or path to a Hugging Face config.json."),
        click.option("--gpus", type=int, default=4096, show_default=True),
        click.option("--gpu", default="H200", show_default=True),
        click.option("--fabric", default="rail-h200-4096", show_default=True,
                     help="Topology preset name."),
        click.option("--tokens", type=float, default=15e12, show_default=True,
                     help="Training tokens."),
        click.option("--days", type=float, default=60.0, show_default=True,
                     help="Target days to train."),
        click.option("--seq-len", type=int, default=4096, show_default=True),
        click.option("--global-batch", type=int, default=16384, show_default=True,
                     help="Sequences per step."),
        click.option("--simulate-top", type=int, default=3, show_default=True,
                     help="EP groups of the best candidates to simulate."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _spec(**kw: Any) -> Any:
    from moesim.plan.spec import DesignSpec

    return DesignSpec(model=kw["model"], gpus=kw["gpus"], gpu=kw["gpu"], fabric=kw["fabric"],
                      tokens=kw["tokens"], days=kw["days"], seq_len=kw["seq_len"],
                      global_batch=kw["global_batch"], simulate_top=kw["simulate_top"])


@click.command()
@_spec_options
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the Markdown report here (default: print it).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON record instead.")
@quiet_option
@_one_line
def design(out: str | None, as_json: bool, quiet: bool, **kw: Any) -> None:
    """Size a training cluster, choose and map its parallel layout (defaults: 1T MoE on
    4096 H200)."""
    from moesim.plan.design import design as run_design
    from moesim.plan.report import to_markdown, to_record

    with Ticker("design", quiet):
        res = run_design(_spec(**kw))
    text = json.dumps(to_record(res), indent=2) if as_json else to_markdown(res)
    if out:
        Path(out).write_text(text + "\n")
        click.echo(f"wrote {out}")
    else:
        click.echo(text)


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

    from moesim.model import flops_per_token, param_counts
    from moesim.plan.design import load_model

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
    from moesim.plan.design import load_model
    from moesim.plan.spec import DesignSpec

    layout = ParallelLayout(**degrees)
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
    """Rank the layouts for a GPU count on a fabric (estimate, then simulated MoE)."""
    from moesim.plan.design import design as run_design
    from moesim.plan.report import _candidates_table

    with Ticker("plan layouts", quiet):
        res = run_design(_spec(**kw))
    click.echo("\n".join(_candidates_table(res)))
