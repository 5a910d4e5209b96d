"""``fedloom params``: trainable parameters per method and adapter rank, and the ranks that match one
method's budget (seed 000 Table 2's fairness rule), as a suite's ``per_method`` block (`fedloom.runs.params`)."""

from __future__ import annotations

from typing import Annotated

import typer

from fedloom.cli.app import ConfigOpt, DataDirOpt, SetOpt, app, console, print_table, progress, with_data_dir


@app.command()
def params(
    methods: Annotated[str, typer.Option(help="comma-separated methods to match, e.g. fedavg,fedsa-lora,ditto")],
    match: Annotated[str, typer.Option(help="the method whose count at the config's rank is the budget")] = "rpa",
    ranks: Annotated[str, typer.Option(help="comma-separated candidate ranks")] = "1,2,4,8,16,32",
    rounds: Annotated[int, typer.Option(help="probe rounds (FedDPA's local adapter starts in round 2)")] = 2,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    set_: SetOpt = None,
) -> None:
    """Count what one client of each method trains (``--rounds`` probe rounds on one date per split) at each rank,
    and print the rank nearest the budget of ``--match`` at the config's rank (within 10 %: seed 000 Table 2)."""
    from fedloom.errors import ConfigError
    from fedloom.runs.params import WITHIN, match_ranks, probe_config

    names = [m.strip() for m in methods.split(",") if m.strip()]
    try:
        candidates = [int(r) for r in ranks.split(",") if r.strip()]
    except ValueError:
        raise ConfigError(f"--ranks {ranks!r}: comma-separated whole numbers, e.g. 2,4,8,16") from None
    overrides = with_data_dir(set_, data_dir)
    cfg = probe_config(config, [*overrides, f"method={match}"], rounds)
    for name in names:  # a typo fails before the model loads
        probe_config(config, [*overrides, f"method={name}"], rounds)
    with progress() as shown:
        budget, matches = match_ranks(cfg, names, match, candidates, shown)
    rows = [[match, str(cfg.adapter.rank), f"{budget:,.0f}", "1.000", "budget"]]
    for m in matches:
        mark = "yes" if m.within else f"no (nearest of {', '.join(map(str, m.counts))})"
        rows.append([m.method, str(m.rank), f"{m.counts[m.rank]:,.0f}", f"{m.ratio:.3f}", mark])
    header = ["method", "rank", "trained per client", "× budget", f"within {WITHIN:.0%}"]
    print_table(header, rows, title=f"trainable parameters on {cfg.dataset} ({cfg.backbone})")
    typer.echo("per_method:  # for a suite (seed 000 Table 2: ranks matched to the budget)")
    for m in matches:  # plain text: rich would read [adapter.rank=…] as markup
        typer.echo(f"  {m.method}: [adapter.rank={m.rank}]")
    if any(not m.within for m in matches):
        console.print(f"[yellow]some methods cannot come within {WITHIN:.0%} at these ranks[/yellow]")
