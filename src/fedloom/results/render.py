"""Result tables (`fedloom.results.table`) as Markdown, CSV, LaTeX and HTML.

Markdown and LaTeX show ``mean ± std`` with one number format per column, the best mean in bold and
``*`` on a comparison whose bootstrap p-value is below ``ALPHA``; CSV keeps the plain numbers
(mean, std, seeds, difference, CI, p) for further analysis.
"""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Sequence

import pandas as pd

from fedloom.results.compare import CLIENTS_WEEKS, ROW_FIELD, Comparison
from fedloom.results.load import DAILY_FILES
from fedloom.results.table import Cell, ResultTable, column_decimals

ALPHA = 0.05


def format_cell(cell: Cell, decimals: int) -> str:
    """``0.432 ± 0.081`` over several seeds, ``0.432`` for one, ``–`` when the run has no value."""
    if cell.n == 0:
        return "–"
    if cell.n == 1:
        return f"{cell.mean:.{decimals}f}"
    return f"{cell.mean:.{decimals}f} ± {cell.std:.{decimals}f}"


def format_comparison(c: Comparison | None) -> str:
    """``+0.013 [-0.067, +0.095] p 0.740 q 0.810; weeks p 0.020; seeds p 0.810; clients p 0.420``, with ``*``
    when the Benjamini–Hochberg q (the bootstrap's p where no family correction was made) is below ALPHA;
    ``weeks p`` (the weeks-only bootstrap) only where CI, p and q resampled clients and weeks."""
    if c is None:
        return "–"
    span = max(abs(c.ci_low), abs(c.ci_high))  # 0 when both rows give the same daily series
    digits = 3 if span == 0 else max(3, 1 - math.floor(math.log10(span)))
    corrected = c.q_value if math.isfinite(c.q_value) else c.p_value
    mark = " *" if corrected < ALPHA else ""
    q = f" q {format_p(c.q_value)}" if math.isfinite(c.q_value) else ""
    ci = f"[{c.ci_low:+.{digits}f}, {c.ci_high:+.{digits}f}]"
    text = f"{c.mean_difference:+.{digits}f} {ci} p {format_p(c.p_value)}{q}{mark}"
    text += f"; weeks p {format_p(c.week_p_value)}" if c.resampled == CLIENTS_WEEKS else ""
    text += f"; seeds p {format_p(c.seed_p_value)}" if math.isfinite(c.seed_p_value) else ""
    return text + (f"; clients p {format_p(c.client_p_value)}" if math.isfinite(c.client_p_value) else "")


def format_p(p: float) -> str:
    """Three digits, ``< 0.001`` below (a bootstrap of 10,000 draws cannot say more; never ``0.000``)."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _comparison_title(table: ResultTable) -> str:
    final = " (final)" if table.daily_file == DAILY_FILES[True] else ""
    return f"Δ daily {table.daily_column}{final} vs {table.reference}"


def _text_rows(table: ResultTable, bold: str) -> tuple[list[str], list[list[str]]]:
    """Header and cells as text; ``bold`` is a format string wrapping a best cell."""
    decimals = {c.label: column_decimals(table.rows, c) for c in table.columns}
    header = ["row", "seeds", *(c.label for c in table.columns)]
    with_comparison = table.reference is not None and table.daily_column is not None
    if with_comparison:
        header.append(_comparison_title(table))
    body = []
    for row in table.rows:
        cells = [row.name, f"{len(row.seeds)} ({','.join(map(str, row.seeds))})"]  # how many, and which
        for c in table.columns:
            text = format_cell(row.cells[c.label], decimals[c.label])
            cells.append(bold.format(text) if row.name in table.best.get(c.label, ()) else text)
        if with_comparison:
            cells.append("reference" if row.name == table.reference else format_comparison(row.comparison))
        body.append(cells)
    return header, body


def dataset_caveat(name: str) -> str:
    """What a table of dataset ``name`` must say about the data (`Dataset.caveat`; none for others)."""
    from fedloom.data.registry import DATASETS  # the loaders' modules (~0.6 s, mostly pandas): on use

    spec = DATASETS.get(name)
    return spec.caveat if spec is not None else ""


def notes(table: ResultTable) -> list[str]:
    """What the marks mean and when a difference is inside the noise, in words."""
    lines = [
        "Cells: mean ± std over seeds (sample std, ddof 1); bold: the best mean of the column "
        "(at its displayed precision). Test metrics at the round chosen on validation; "
        "`final`: the models after the last round. KB per participating client and round (eq. 28).",
    ]
    caveat = dataset_caveat(table.dataset)
    if caveat:
        lines.append(f"Data: {caveat}.")
    fitted = [row for row, measure in table.train_loss_measures.items() if measure == "fitted"]
    if fitted:
        lines.append(
            f"`train loss` of {', '.join(f'`{r}`' for r in fitted)}: the clients' mean, on the last round, of the "
            "returned model's loss on all their training rows (train.train_loss: fitted), comparable with `train "
            "loss const`; of other rows trained in rounds: the mean of the local steps' mini-batch losses."
        )
    if table.selection is not None:
        e = table.selection
        lines.append(
            f"Round selection: the round chosen on validation beat the last round's models on test `{table.metric}` "
            f"in {e.helped} of {e.runs} runs, lost in {e.hurt}, was the last round in {e.same}; mean gain "
            f"{e.mean_gain:+.3g} (positive: the choice helped)."
        )
    if table.reference is not None and table.daily_column is not None:
        final = table.daily_file == DAILY_FILES[True]
        source = "the models after the last round" if final else "the round chosen on validation"
        lines.append(
            f"Δ: mean difference of the seed-mean daily `{table.daily_column}` ({table.daily_file}: {source}) "
            f"against `{table.reference}`, 95 % CI and p-value of a paired bootstrap {_resampled(table)}; "
            f"q: Benjamini–Hochberg over the {table.compared} rows compared in this table (Holm's adjusted p in "
            f"the CSV); `seeds p`: paired t-test over the seeds of the per-seed means (a `*` beside a large "
            f"seeds p: the seeds disagree, e.g. one seed carries the difference); `clients p`: paired t-test over "
            f"the clients of each client's test `{table.metric}` (seed mean; how many clients: the CSV) — a `*` "
            f"beside a large clients p: a few clients carry the difference; "
            f"* q < {ALPHA}. A CI that contains 0 means the difference is inside the noise."
        )
        if ROW_FIELD in table.reference:
            lines.append(
                f"`{table.reference}`: each row against the row its name makes (rows with none are not compared); "
                f"`gain over`: the test metric's difference from that row, per seed; `ρ(heterogeneity, gain)`: "
                f"per seed, Spearman's ρ between the clients' heterogeneity scores (seed 000, eq. 26) and their "
                f"gains (eq. 27) — seed 000 Table 9's last column."
            )
        compared = [r.comparison for r in table.rows if r.comparison is not None]
        mde = [c.mde for c in compared if math.isfinite(c.mde) and c.mde > 0]  # 0: the reference's own series
        if mde:
            lines.append(
                f"What this table could detect: a true difference in daily `{table.daily_column}` of "
                f"{statistics.median(mde):.3g} (median over the compared rows; {min(mde):.3g}–{max(mde):.3g}) "
                f"is found with 80 % power by a two-sided 5 % test (2.80 × the bootstrap's standard error; per "
                f"row in the CSV's `mde`). Smaller differences, significant or not, are not resolved here."
            )
    return lines


def _resampled(table: ResultTable) -> str:
    """What the bootstrap resampled, in words: clients and weeks where the runs wrote each client's series."""
    compared = [r.comparison for r in table.rows if r.comparison is not None]
    both = sum(c.resampled == CLIENTS_WEEKS for c in compared)
    weeks = "over trading weeks (blocks of a calendar week)"
    joint = ("that resamples clients and trading weeks jointly (every drawn client on every drawn week, from the "
             "runs' clients.csv; a universe-wide correlation is recomputed each day on the drawn clients' "
             "names: a difference must hold across data owners and calendar; `weeks p`: the same over weeks "
             "alone)")  # fmt: skip
    if both == 0:
        return weeks
    if both == len(compared):
        return joint
    return f"{joint} for the {both} rows showing `weeks p`, else {weeks}"


def to_markdown(tables: Sequence[ResultTable]) -> str:
    parts = []
    for table in tables:
        header, body = _text_rows(table, "**{}**")
        lines = [f"## {table.dataset}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        parts.append("\n".join([*lines, "", *notes(table)]) + "\n")
    return "\n".join(parts)


def to_html(table: ResultTable) -> str:
    """One dataset's table as an HTML ``<table>`` (best cells in ``<b>``) followed by its notes."""
    header, body = _text_rows(table, "\x00{}\x01")  # bold placeholders survive escaping

    def cell(text: str, tag: str) -> str:
        return f"<{tag}>" + html.escape(text).replace("\x00", "<b>").replace("\x01", "</b>") + f"</{tag}>"

    lines = ["<table>", "<tr>" + "".join(cell(h, "th") for h in header) + "</tr>"]
    lines += ["<tr>" + "".join(cell(c, "td") for c in cells) + "</tr>" for cells in body]
    notes_html = "".join(f"<p class='note'>{html.escape(n).replace('`', '')}</p>" for n in notes(table))
    return "\n".join([*lines, "</table>", notes_html])


def to_frame(tables: Sequence[ResultTable]) -> pd.DataFrame:
    """One line per row: dataset, row, seeds, then per column its mean and std, then the comparison."""
    records = []
    for table in tables:
        for row in table.rows:
            record: dict[str, object] = {"dataset": table.dataset, "row": row.name, "seeds": len(row.seeds)}
            for c in table.columns:
                record[c.label] = row.cells[c.label].mean
                record[f"{c.label} std"] = row.cells[c.label].std
            if row.comparison is not None:
                record |= {
                    "reference": table.partners.get(row.name, table.reference),
                    "daily": table.daily_column,
                    "daily_file": table.daily_file,
                    "difference": row.comparison.mean_difference,
                    "ci_low": row.comparison.ci_low,
                    "ci_high": row.comparison.ci_high,
                    "p_value": row.comparison.p_value,
                    "resampled": row.comparison.resampled,
                    "week_p_value": row.comparison.week_p_value,
                    "q_value": row.comparison.q_value,
                    "holm_p": row.comparison.holm_p,
                    "mde": row.comparison.mde,
                    "seed_p_value": row.comparison.seed_p_value,
                    "client_p_value": row.comparison.client_p_value,
                    "clients": row.comparison.clients,
                }
            records.append(record)
    return pd.DataFrame.from_records(records)


def to_csv(tables: Sequence[ResultTable]) -> str:
    return str(to_frame(tables).to_csv(index=False))


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
                 ">": r"\textgreater{}", "`": ""}  # fmt: skip


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)


def to_latex(tables: Sequence[ResultTable]) -> str:
    """One booktabs ``table`` per dataset (needs ``\\usepackage{booktabs}``)."""
    parts = []
    for table in tables:
        header, body = _text_rows(table, "\x00{}\x01")  # bold placeholders survive escaping
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{_latex_cell(table.dataset)}: {_latex_cell(' '.join(notes(table)))}}}",
            r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
            r"\toprule",
            " & ".join(_latex_cell(h) for h in header) + r" \\",
            r"\midrule",
        ]
        for cells in body:
            lines.append(" & ".join(_latex_cell(c) for c in cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def _latex_cell(text: str) -> str:
    escaped = latex_escape(text).replace("±", r"$\pm$").replace("Δ", r"$\Delta$").replace("–", "--")
    return escaped.replace("\x00", r"\textbf{").replace("\x01", "}")
