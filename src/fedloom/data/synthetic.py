"""SYNTHETIC heterogeneous market: the embedded default dataset (generated data, not a real market).

Stocks belong to sectors (one sector = one client). Each trading day a stock may get company news,
and some days carry macro news that every stock sees. The next-day return is::

    r[i,t+1] = β_i m[t+1] + s · (sens[sector] · rule[g, event, regime] · impact[event] · u
                                 + macro[event, sector]) + γ[sector, regime] · mom5[i,t] + σ ε

with a hidden market regime (bull / bear / volatile, a persistent Markov chain). The text→return
map differs by sector (a rate hike lifts banks and sinks real estate; an oil spike lifts energy and
hurts consumers; healthcare reacts strongly to trial news) and the momentum effect differs by sector
and regime, so one shared adapter cannot fit every client equally well. ``rule`` is 1 by default.

Planted rule groups (``rule_groups`` > 1, a testbed where routing clients to adapters matters).
Sectors are assigned **round-robin**: the k-th sector in ``SECTORS`` order joins group
``k % rule_groups`` (6 sectors, 2 groups: group 0 = technology, energy, consumer; group 1 =
financials, healthcare, industrials). Group 0 keeps today's rules. In groups 1-3 the same headlines
of the eight shared company events move returns by ``rule · impact`` (`_RULES`). The events come in
pairs and each planted group flips a different two of the three pairs earnings / guidance / corporate,
so no group is a global sign flip of another (any two groups agree on two pairs, disagree on two)::

    event            impact  group 0  group 1  group 2  group 3
    earnings_beat     +1.0      +1       −1       +1       −1
    earnings_miss     −1.0      +1       −1       +1       −1
    guidance_raise    +0.8      +1       +1       −1       −1
    guidance_cut      −0.9      +1       +1       −1       −1
    upgrade           +0.5      +1     +1 / −2  +1 / −2  +1 / −2    (bull or bear / volatile regime)
    downgrade         −0.5      +1     +1 / −2  +1 / −2  +1 / −2
    lawsuit           −0.7      +1       −1       −1       +1
    buyback           +0.4      +1       −1       −1       +1

Text × regime: in groups ≥ 1, analyst news reverses and doubles on days whose regime is ``volatile``
(an upgrade then moves −1.0 units), so over all regimes it averages to about nothing. The volatile
regime is the one the prompt partly shows: its market volatility lifts ``vol20``. Sector-only events
(trial news, data breach, discovery) and macro news keep today's effects in every group.
``rule_strength`` s in [0, 1] blends the rules, ``1 + s · (rule − 1)``: s = 0 puts group labels on
today's market (a labelled IID control: today's table plus ``rule_group``), s = 1 the full conflict.
``sector_effects=False`` removes every sector difference (sensitivity 1, no sector-only events, macro
news at its default impact everywhere, growth-style momentum); ``stock_betas=False`` gives every stock
market beta 1 (otherwise U(0.7, 1.3): a persistent per-company effect that the company names in the
news let a client's own model memorize). With both off the planted groups are the only structure across
clients, and with ``rule_strength=0`` the clients are identically distributed.
The ``rule_group`` column (only when ``rule_groups`` > 1) is for audits: never a covariate, never in
the text.

Why private heads cannot absorb it: the same headline means opposite things in different groups, and
for analyst news the sign depends on the regime, a text × covariate interaction that a linear head on
a shared representation cannot express. With few training rows per client a head also cannot relearn
every event's sign alone, while clients of one group can pool theirs. Few rows per client:
``days=40, stocks_per_sector=5`` gives 200 rows per client, 120 of them train under the 60/20/20 split.

Signal to noise (measured with days=600, rule_groups=2; event effects net of the day's mean return).
Defaults (``impact=0.01, noise=0.008``): event effects ±0.4-1.0 % against 1.1 % of residual spread
(momentum, beta and news-size jitter included); event × group × regime × sector × macro cells explain
33 % of the cross-sectional variance. Recommended routing testbed: ``impact=0.02, noise=0.004``:
effects ±0.8-2.1 % against 1.2 %, 61 % explained, so one event's mean is pinned to about ±0.4 % by the
~9 rows a client of 120 training rows has of it, and to about ±0.25 % by a 3-client group's pool.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fedloom.data.schema import SampleTable
from fedloom.errors import DataError

SECTORS = (
    "technology",
    "financials",
    "energy",
    "healthcare",
    "consumer",
    "industrials",
    "utilities",
    "real_estate",
)
_NAMES = {
    "technology": (
        "Nimbus Systems",
        "Quantix Labs",
        "Corvid Micro",
        "Helio Software",
        "Vantage Cloud",
        "Pixelar",
    ),
    "financials": (
        "Harbor Bancorp",
        "Granite Trust",
        "Meridian Capital",
        "Keystone Financial",
        "Oakline Bank",
        "Fidelis",
    ),
    "energy": (
        "Petrova Energy",
        "Basin Oil",
        "Northstar Drilling",
        "Crestline Gas",
        "Solace Power",
        "Redrock Fuels",
    ),
    "healthcare": (
        "Avera Therapeutics",
        "Cellion Bio",
        "Medora Health",
        "Genvia Pharma",
        "Lumos Diagnostics",
        "Curex",
    ),
    "consumer": (
        "Bramble Foods",
        "Urban Threads",
        "Lakeside Retail",
        "Sunny Brands",
        "Maple Goods",
        "Velvet Home",
    ),
    "industrials": (
        "Forge Dynamics",
        "Atlas Machinery",
        "Ironbridge Rail",
        "Summit Aero",
        "Keel Logistics",
        "Titan Works",
    ),
    "utilities": (
        "Brightwater Utilities",
        "Evergrid Power",
        "Clearstream Water",
        "Hearth Gas",
        "Ampere Grid",
        "Tidal",
    ),
    "real_estate": (
        "Parkview REIT",
        "Cornerstone Realty",
        "Skyline Properties",
        "Haven Homes",
        "Plaza Estates",
        "Arbor",
    ),
}

# company news: event -> (impact in units of s, headline templates)
_COMPANY = {
    "earnings_beat": (
        1.0,
        ("{c} beats quarterly earnings estimates.", "{c} reports profit well above forecasts."),
    ),
    "earnings_miss": (
        -1.0,
        ("{c} misses quarterly earnings estimates.", "{c} reports a surprise drop in profit."),
    ),
    "guidance_raise": (
        0.8,
        ("{c} raises its full-year outlook.", "{c} lifts revenue guidance for the year."),
    ),
    "guidance_cut": (
        -0.9,
        ("{c} cuts its full-year outlook.", "{c} warns revenue will fall short this year."),
    ),
    "upgrade": (0.5, ("Analysts upgrade {c} to buy.", "{c} upgraded on strong demand.")),
    "downgrade": (-0.5, ("Analysts downgrade {c} to sell.", "{c} downgraded on weak demand.")),
    "lawsuit": (-0.7, ("{c} faces a class-action lawsuit.", "Regulators sue {c} over disclosures.")),
    "buyback": (0.4, ("{c} announces a share buyback.", "{c} expands its stock repurchase plan.")),
}
_SECTOR_COMPANY = {
    "healthcare": {
        "trial_success": (
            1.8,
            ("{c} drug succeeds in a late-stage trial.", "Regulators approve a new {c} therapy."),
        ),
        "trial_failure": (
            -2.0,
            ("{c} drug fails a late-stage trial.", "Regulators reject the {c} application."),
        ),
    },
    "technology": {"data_breach": (-1.2, ("{c} discloses a major data breach.", "Hackers breach {c} customer data."))},
    "energy": {"discovery": (1.0, ("{c} reports a large new oil discovery.", "{c} finds a major gas field."))},
}
_SENSITIVITY = {
    "technology": 1.4, "financials": 0.8, "energy": 0.7, "healthcare": 1.3,
    "consumer": 1.0, "industrials": 0.9, "utilities": 0.4, "real_estate": 0.6,
}  # fmt: skip
# macro news: event -> (impact per sector, impact elsewhere, headline)
_MACRO = {
    "rate_hike": ({"financials": 0.8, "technology": -1.0, "real_estate": -1.2, "utilities": -0.7}, -0.2,
                  "The central bank raises interest rates."),
    "rate_cut": ({"financials": -0.6, "technology": 0.9, "real_estate": 1.0, "utilities": 0.5}, 0.2,
                 "The central bank cuts interest rates."),
    "oil_spike": ({"energy": 1.2, "industrials": -0.6, "consumer": -0.7}, -0.1, "Oil prices jump on supply fears."),
    "oil_crash": ({"energy": -1.3, "industrials": 0.4, "consumer": 0.5}, 0.0, "Oil prices plunge on weak demand."),
    "chip_shortage": ({"technology": -0.9, "industrials": -0.7}, 0.0, "A global chip shortage worsens."),
    "drug_pricing": ({"healthcare": -1.2}, 0.0, "Lawmakers pass a drug pricing bill."),
}  # fmt: skip
_REGIMES = ("bull", "bear", "volatile")
_MARKET = {"bull": (0.0008, 0.006), "bear": (-0.0010, 0.010), "volatile": (0.0, 0.018)}
# momentum coefficient by sector kind and regime: trend in bull markets, reversal in bear markets
_MOMENTUM = {
    "growth": {"bull": 0.20, "bear": -0.15, "volatile": -0.05},
    "defensive": {"bull": -0.05, "bear": 0.10, "volatile": 0.05},
}
_GROWTH = {"technology", "consumer", "industrials", "healthcare"}
# planted rule groups: shared company event -> multiplier of its impact in groups 0..3 (module docstring)
_RULES = {
    "earnings_beat": (1, -1, 1, -1), "earnings_miss": (1, -1, 1, -1),
    "guidance_raise": (1, 1, -1, -1), "guidance_cut": (1, 1, -1, -1),
    "upgrade": (1, 1, 1, 1), "downgrade": (1, 1, 1, 1),
    "lawsuit": (1, -1, -1, 1), "buyback": (1, -1, -1, 1),
}  # fmt: skip
# in groups >= 1 on volatile days: analyst news reverses and doubles
_VOLATILE_RULES = {"upgrade": -2.0, "downgrade": -2.0}
MAX_RULE_GROUPS = 4
WARMUP_DAYS = 20


class SyntheticMarketConfig(BaseModel):
    """Size and noise of the SYNTHETIC market."""

    model_config = ConfigDict(extra="forbid")

    sectors: int = Field(6, ge=2, le=len(SECTORS), description="number of sectors (= clients)")
    stocks_per_sector: int = Field(5, ge=1, le=6, description="stocks in each sector")
    days: int = Field(48, ge=10, description="trading days emitted (after a 20-day warm-up)")
    seed: int = Field(0, description="data seed, independent of the training seed")
    news_probability: float = Field(0.6, ge=0, le=1, description="chance of company news per stock-day")
    macro_probability: float = Field(0.25, ge=0, le=1, description="chance of macro news per day")
    noise: float = Field(0.008, gt=0, description="idiosyncratic daily return volatility")
    impact: float = Field(0.01, gt=0, description="return of a unit news impact")
    rule_groups: int = Field(
        1, ge=1, le=MAX_RULE_GROUPS, description="planted groups with conflicting news rules (sectors round-robin)"
    )
    rule_strength: float = Field(
        1.0, ge=0, le=1, description="blend of the planted rules: 0 = group 0's rules everywhere, 1 = full conflict"
    )
    sector_effects: bool = Field(
        True,
        description="False: every sector reacts alike (sensitivity 1, no sector-only events, macro news moves "
        "every sector by its default impact, one momentum kind), so planted groups are the only structure",
    )
    stock_betas: bool = Field(
        True, description="False: every stock has market beta 1 (no persistent per-company ranking to memorize)"
    )

    @model_validator(mode="after")
    def _groups_fit_sectors(self) -> SyntheticMarketConfig:
        if self.rule_groups > self.sectors:
            raise ValueError(f"rule_groups ({self.rule_groups}) cannot exceed sectors ({self.sectors})")
        return self


def make_synthetic_market(cfg: SyntheticMarketConfig) -> SampleTable:
    """Generate the market; deterministic in ``cfg`` (the same config gives the same table)."""
    rng = np.random.default_rng(cfg.seed)
    sectors = SECTORS[: cfg.sectors]
    stocks = [(s, j) for s in sectors for j in range(cfg.stocks_per_sector)]
    n, total = len(stocks), WARMUP_DAYS + cfg.days + 1
    sector_of = np.array([s for s, _ in stocks])
    beta = rng.uniform(0.7, 1.3, size=n)  # drawn either way, so the rest of the random stream is unchanged
    if not cfg.stock_betas:
        beta = np.ones(n)
    sens = np.array([_SENSITIVITY[s] if cfg.sector_effects else 1.0 for s in sector_of])
    group_of = {s: k % cfg.rule_groups for k, s in enumerate(sectors)}
    rule_group = np.array([group_of[s] for s in sector_of])

    regime = _regimes(rng, total)
    returns = np.zeros((total, n))
    rows = []
    dates = pd.bdate_range("2022-01-03", periods=total)
    for t in range(total - 1):
        mom5 = returns[max(0, t - 4) : t + 1].sum(0)
        vol20 = returns[max(0, t - 19) : t + 1].std(0) if t > 0 else np.zeros(n)
        volume_z = rng.normal(size=n)
        macro = rng.choice(list(_MACRO)) if rng.random() < cfg.macro_probability else None
        events, texts, impact = _company_news(rng, stocks, cfg.news_probability, cfg.sector_effects)
        impact = impact * _rules(events, rule_group, regime[t], cfg.rule_strength)
        signal = sens * impact * rng.uniform(0.5, 1.5, size=n) * (1 + 0.3 * np.tanh(volume_z))
        if macro is not None:
            per_sector, default, _ = _MACRO[macro]
            signal = signal + np.array(
                [per_sector.get(s, default) if cfg.sector_effects else default for s in sector_of]
            )
        kind = np.array(["growth" if s in _GROWTH or not cfg.sector_effects else "defensive" for s in sector_of])
        gamma = np.array([_MOMENTUM[k][regime[t]] for k in kind])
        mu, sigma = _MARKET[regime[t + 1]]
        market = rng.normal(mu, sigma)
        returns[t + 1] = beta * market + cfg.impact * signal + gamma * mom5 + cfg.noise * rng.normal(size=n)
        if t < WARMUP_DAYS:
            continue
        for i, (sector, j) in enumerate(stocks):
            head = f"{_MACRO[macro][2]} " if macro is not None else ""
            rows.append(
                {
                    "date": dates[t],
                    "instrument": f"{sector[:4].upper()}{j + 1:02d}",
                    "group": sector,
                    "text": head + texts[i],
                    "mom5": float(mom5[i]),
                    "vol20": float(vol20[i]),
                    "volume_z": float(volume_z[i]),
                    "event": events[i],
                    "macro": macro or "none",
                    "regime": regime[t],
                    "target": float(returns[t + 1, i]),
                }
            )
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise DataError("synthetic market produced no rows")
    if cfg.rule_groups > 1:
        frame["rule_group"] = frame["group"].map(group_of).astype(int)
    audit = ("rule_group",) if "rule_group" in frame.columns else ()
    return SampleTable(frame, ("mom5", "vol20", "volume_z"), name="synthetic", synthetic=True, audit_columns=audit)


def _regimes(rng: np.random.Generator, total: int, stay: float = 0.95) -> list[str]:
    out = [str(rng.choice(_REGIMES))]
    for _ in range(total - 1):
        out.append(out[-1] if rng.random() < stay else str(rng.choice([r for r in _REGIMES if r != out[-1]])))
    return out


def _rules(events: list[str], groups: np.ndarray, regime: str, strength: float) -> np.ndarray:
    """Per-stock multiplier of the company-event impact under the planted rules (exactly 1 in group 0)."""
    full = np.array([_rule(e, int(g), regime) for e, g in zip(events, groups, strict=True)])
    return 1 + strength * (full - 1)


def _rule(event: str, group: int, regime: str) -> float:
    if group == 0 or event not in _RULES:
        return 1.0
    if regime == "volatile" and event in _VOLATILE_RULES:
        return _VOLATILE_RULES[event]
    return float(_RULES[event][group])


def _company_news(
    rng: np.random.Generator, stocks: list[tuple[str, int]], probability: float, sector_events: bool = True
) -> tuple[list[str], list[str], np.ndarray]:
    events, texts, impact = [], [], np.zeros(len(stocks))
    for i, (sector, j) in enumerate(stocks):
        company = _NAMES[sector][j]
        if rng.random() >= probability:
            events.append("none")
            texts.append(f"No news for {company}.")
            continue
        menu = {**_COMPANY, **(_SECTOR_COMPANY.get(sector, {}) if sector_events else {})}
        event = str(rng.choice(list(menu)))
        value, templates = menu[event]
        events.append(event)
        texts.append(templates[int(rng.integers(len(templates)))].format(c=company))
        impact[i] = value
    return events, texts, impact
