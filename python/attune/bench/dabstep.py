"""DABstep-shaped DAGs on synthetic payments / fees / merchants tables (``attune bench dag
dabstep``).

The source (chapter 4, "DABstep: Evaluation with Real DAGs") runs five DAGs adapted from
solutions to hard DABstep questions (Adyen's payments analysis benchmark) over three Parquet
tables — payments (5 GB), fees (20 MB), merchants (5 MB) — with the node counts of its Table
4.4: every DAG loads the three tables (3 nodes), preprocesses (appends columns to payments and
filters: 3, 7, 2, 3, 2 nodes) and computes in a wide parallel phase (24, 10, 12, 24, 12 nodes).
The solutions are not public; these DAGs have the same shape and the same kind of work on
synthetic tables with DABstep's columns:

* payments: one row per transaction (merchant, card scheme, day of year, credit or not, amount
  in EUR, issuing and acquirer country, ACI, fraudulent dispute, ...);
* fees: fee rules (card scheme, credit, ACI, account type, fixed amount, rate in basis points);
* merchants: account type, merchant category code, capture delay, acquirer.

Preprocessing appends columns to payments (month, intracountry, the merchant's account type
and category code) and filters it; compute nodes answer one question each (the fee delta if a
rule's rate changed, fees per merchant in a month, fraud rates per card scheme or country...),
each a small table. Table 4.4 lists DAG 3 as 3 + 2 + 12 nodes and a total of 15; the total is
kept here (10 compute nodes).

The data is generated from a seed: the same bytes every run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from attune.pipelines import DAG, DeCache
from attune.pipelines.dag import Node

__all__ = ["DAGS", "PHASES", "build", "build_all", "phase_of", "write_tables"]

SCHEMES = ["GlobalCard", "NexPay", "SwiftCharge", "TransactPlus", "RandomCard"]
COUNTRIES = ["NL", "BE", "FR", "DE", "IT", "ES", "SE", "LU"]
ACIS = ["A", "B", "C", "D", "E", "F", "G"]
ACCOUNT_TYPES = ["R", "D", "H", "F", "S", "O"]
MERCHANTS = 30
FEE_RULES = 1000
#: Columns the loaders read dictionary-encoded (low cardinality strings).
PAYMENT_DICTIONARY = ["merchant", "card_scheme", "issuing_country", "acquirer_country", "aci"]

#: Node counts per DAG: (preprocess, compute); every DAG also has 3 load nodes.
DAGS = {1: (3, 24), 2: (7, 10), 3: (2, 10), 4: (3, 24), 5: (2, 12)}


def write_tables(directory: str, payments_rows: int, seed: int = 7) -> dict[str, str]:
    """Writes payments, fees and merchants as zstd Parquet under ``directory``; returns paths."""
    rng = np.random.default_rng(seed)
    n = payments_rows
    merchants = [f"Merchant_{i:02d}" for i in range(MERCHANTS)]
    m_idx = rng.integers(0, MERCHANTS, n)
    merchant_acq = rng.integers(0, len(COUNTRIES), MERCHANTS)
    payments = pa.table(
        {
            "psp_reference": pa.array(np.arange(n, dtype=np.int64) * 7919 + 10**10),
            "merchant": pa.array(np.array(merchants, dtype=object)[m_idx]),
            "card_scheme": pa.array(np.array(SCHEMES, dtype=object)[rng.integers(0, 5, n)]),
            "year": pa.array(np.full(n, 2023, dtype=np.int32)),
            "hour_of_day": pa.array(rng.integers(0, 24, n).astype(np.int32)),
            "day_of_year": pa.array(rng.integers(1, 366, n).astype(np.int32)),
            "is_credit": pa.array(rng.random(n) < 0.7),
            "eur_amount": pa.array(np.round(rng.lognormal(4.0, 1.0, n), 2)),
            "issuing_country": pa.array(
                np.array(COUNTRIES, dtype=object)[rng.integers(0, len(COUNTRIES), n)]
            ),
            "acquirer_country": pa.array(np.array(COUNTRIES, dtype=object)[merchant_acq[m_idx]]),
            "aci": pa.array(np.array(ACIS, dtype=object)[rng.integers(0, len(ACIS), n)]),
            "has_fraudulent_dispute": pa.array(rng.random(n) < 0.08),
            "is_refused_by_adyen": pa.array(rng.random(n) < 0.05),
        }
    )
    k = FEE_RULES
    fees = pa.table(
        {
            "ID": pa.array(np.arange(1, k + 1, dtype=np.int64)),
            "card_scheme": pa.array(np.array(SCHEMES, dtype=object)[rng.integers(0, 5, k)]),
            "is_credit": pa.array(rng.random(k) < 0.5),
            "aci": pa.array(np.array(ACIS, dtype=object)[rng.integers(0, len(ACIS), k)]),
            "account_type": pa.array(
                np.array(ACCOUNT_TYPES, dtype=object)[rng.integers(0, len(ACCOUNT_TYPES), k)]
            ),
            "fixed_amount": pa.array(np.round(rng.random(k) * 0.15, 2)),
            "rate": pa.array(rng.integers(10, 100, k).astype(np.int64)),
        }
    )
    merchants_t = pa.table(
        {
            "merchant": pa.array(merchants),
            "account_type": pa.array(
                np.array(ACCOUNT_TYPES, dtype=object)[
                    rng.integers(0, len(ACCOUNT_TYPES), MERCHANTS)
                ]
            ),
            "merchant_category_code": pa.array(
                rng.choice([5411, 5812, 5999, 7997, 8062], MERCHANTS)
            ),
            "capture_delay": pa.array(
                rng.choice(["immediate", "1", "2", "7", "manual"], MERCHANTS)
            ),
            "acquirer": pa.array([f"acquirer_{c}" for c in merchant_acq]),
        }
    )
    out = {}
    for name, t in (("payments", payments), ("fees", fees), ("merchants", merchants_t)):
        path = os.path.join(directory, f"{name}.parquet")
        # One row group: pyarrow gives each row group's dictionary-encoded chunks their own
        # dictionary, which the Arrow IPC file peers cannot write (one dictionary per field).
        pq.write_table(t, path, compression="zstd", row_group_size=max(1, t.num_rows))
        out[name] = path
    return out


# --------------------------------------------------------------------------------------------
# Node functions (closures over small parameters; picklable by value for Ray).


def _with_month(p: pa.Table) -> pa.Table:
    # Month of a 2023 day of year; intracountry: issuer and acquirer in the same country.
    month = pc.add(pc.divide(pc.subtract(p["day_of_year"], 1), 31), 1)
    p = p.append_column("month", pc.cast(month, pa.int32()))
    intra = pc.equal(
        pc.cast(p["issuing_country"], pa.string()), pc.cast(p["acquirer_country"], pa.string())
    )
    return p.append_column("intracountry", intra)


def _with_merchant(p: pa.Table, m: pa.Table) -> pa.Table:
    # The merchant's account type and category code per payment (a lookup, then takes).
    idx = pc.index_in(pc.cast(p["merchant"], pa.string()), value_set=m["merchant"])
    p = p.append_column("account_type", pc.take(m["account_type"], idx))
    return p.append_column("merchant_category_code", pc.take(m["merchant_category_code"], idx))


def _applicable_fees(f: pa.Table) -> pa.Table:
    # One rule per (card scheme, credit, ACI, account type): the lowest ID applies.
    keys = ["card_scheme", "is_credit", "aci", "account_type"]
    first = f.group_by(keys, use_threads=False).aggregate([("ID", "min")])
    ids = first["ID_min"]
    return f.filter(pc.is_in(f["ID"], value_set=ids))


def _filter_eq(column: str, value: Any) -> Callable[[pa.Table], pa.Table]:
    def run(p: pa.Table) -> pa.Table:
        col = p[column]
        if pa.types.is_dictionary(col.type):
            col = pc.cast(col, col.type.value_type)
        return p.filter(pc.equal(col, value))

    return run


def _filter_credit(p: pa.Table) -> pa.Table:
    return p.filter(p["is_credit"])


def _fees_of(p: pa.Table, fees: pa.Table) -> pa.Table:
    """Each payment with its applicable rule's fee (a hash join on the rule's keys)."""
    keys = ["card_scheme", "is_credit", "aci", "account_type"]
    cols = [*keys, "merchant", "eur_amount", "month"]
    sel = p.select([c for c in cols if c in p.column_names])
    sel = pa.table(
        {
            c: pc.cast(sel[c], sel[c].type.value_type)
            if pa.types.is_dictionary(sel[c].type)
            else sel[c]
            for c in sel.column_names
        }
    )
    j = sel.join(fees.select([*keys, "ID", "fixed_amount", "rate"]), keys, use_threads=False)
    fee = pc.add(j["fixed_amount"], pc.divide(pc.multiply(j["rate"], j["eur_amount"]), 10_000.0))
    return j.append_column("fee", fee)


def _fee_delta(index: int, new_rate: int) -> Callable[[pa.Table, pa.Table], pa.Table]:
    """Per merchant: what it would pay more if the ``index``-th applicable rule's rate became
    ``new_rate`` (the payments the rule applies to are those matching its keys)."""

    def run(p: pa.Table, fees: pa.Table) -> pa.Table:
        rule = fees.slice(index % fees.num_rows, 1).to_pylist()[0]
        hit = pc.equal(p["is_credit"], rule["is_credit"])
        for key in ("card_scheme", "aci", "account_type"):
            col = p[key]
            if pa.types.is_dictionary(col.type):
                col = pc.cast(col, col.type.value_type)
            hit = pc.and_(hit, pc.equal(col, rule[key]))
        j = p.filter(hit)
        delta = pc.divide(pc.multiply(new_rate - rule["rate"], j["eur_amount"]), 10_000.0)
        merchant = pc.cast(j["merchant"], pa.string())
        t = pa.table({"merchant": merchant, "delta": delta})
        return t.group_by("merchant", use_threads=False).aggregate([("delta", "sum")])

    return run


def _fees_in_month(month: int) -> Callable[[pa.Table, pa.Table], pa.Table]:
    def run(p: pa.Table, fees: pa.Table) -> pa.Table:
        p = p.filter(pc.equal(p["month"], month))
        j = _fees_of(p, fees)
        t = pa.table({"merchant": j["merchant"], "fee": j["fee"]})
        return t.group_by("merchant", use_threads=False).aggregate([("fee", "sum")])

    return run


def _fraud_rate_by(column: str) -> Callable[[pa.Table], pa.Table]:
    def run(p: pa.Table) -> pa.Table:
        key = p[column]
        if pa.types.is_dictionary(key.type):
            key = pc.cast(key, key.type.value_type)
        t = pa.table(
            {
                "key": key,
                "fraud": pc.cast(p["has_fraudulent_dispute"], pa.float64()),
                "eur": p["eur_amount"],
            }
        )
        return t.group_by("key", use_threads=False).aggregate(
            [("fraud", "mean"), ("eur", "sum"), ("eur", "count")]
        )

    return run


def _avg_amount_by(column: str) -> Callable[[pa.Table], pa.Table]:
    def run(p: pa.Table) -> pa.Table:
        key = p[column]
        if pa.types.is_dictionary(key.type):
            key = pc.cast(key, key.type.value_type)
        t = pa.table({"key": key, "eur": p["eur_amount"]})
        return t.group_by("key", use_threads=False).aggregate([("eur", "mean")])

    return run


# --------------------------------------------------------------------------------------------
# The five DAGs.

#: A run's phases, in order: the three loads, the preprocessing chain (appending columns to
#: payments, the applicable rules, the filtered subsets) and the wide phase of compute nodes.
PHASES = ("load", "preprocess", "compute")
_LOADS = {"payments", "fees", "merchants"}
_PREPROCESS = {"with_month", "with_merchant", "applicable_fees", "credit", "merchant"}


def phase_of(name: str) -> str:
    """The phase (:data:`PHASES`) of a node of these DAGs, by its name (``d<N>.`` prefix or
    not)."""
    base = name.split(".", 1)[1] if name[:1] == "d" and "." in name else name
    if base in _LOADS:
        return "load"
    if base in _PREPROCESS or base.startswith("scheme_"):
        return "preprocess"
    return "compute"


def _loads(dag: DAG, paths: dict[str, str], cache: DeCache | None, tag: str) -> tuple[Node, ...]:
    p = dag.load_parquet(
        paths["payments"], dictionary_columns=PAYMENT_DICTIONARY, cache=cache, name=f"{tag}payments"
    )
    f = dag.load_parquet(paths["fees"], cache=cache, name=f"{tag}fees")
    m = dag.load_parquet(paths["merchants"], cache=cache, name=f"{tag}merchants")
    return p, f, m


def build(
    number: int, paths: dict[str, str], cache: DeCache | None = None, dag: DAG | None = None
) -> DAG:
    """DAG ``number`` (1-5) with Table 4.4's node counts; into ``dag`` when given (prefixing
    node names with ``d<number>.``)."""
    if number not in DAGS:
        raise ValueError(f"no DABstep-shaped DAG {number} (1-5)")
    tag = f"d{number}." if dag is not None else ""
    dag = dag or DAG(f"dabstep{number}")
    p, f, m = _loads(dag, paths, cache, tag)

    def node(fn, *inputs, name):
        return dag.node(fn, *inputs, name=f"{tag}{name}")

    if number in (1, 4):
        # Fee questions: payments + month + merchant attributes, applicable rules; then one
        # compute node per (rule, new rate) scenario.
        pm = node(_with_month, p, name="with_month")
        pa_ = node(_with_merchant, pm, m, name="with_merchant")
        fa = node(_applicable_fees, f, name="applicable_fees")
        for i in range(24):
            index = i if number == 1 else 7 * i + 3
            node(_fee_delta(index, 99 if number == 1 else 1), pa_, fa, name=f"delta{i}")
    elif number == 2:
        # Fraud questions: per card scheme and for credit payments, rates by several keys.
        pm = node(_with_month, p, name="with_month")
        pa_ = node(_with_merchant, pm, m, name="with_merchant")
        subsets = [node(_filter_eq("card_scheme", s), pa_, name=f"scheme_{s}") for s in SCHEMES[:4]]
        subsets.append(node(_filter_credit, pa_, name="credit"))
        for k, sub in enumerate(subsets):
            node(_fraud_rate_by("issuing_country"), sub, name=f"fraud_country{k}")
            node(_fraud_rate_by("month"), sub, name=f"fraud_month{k}")
    elif number == 3:
        # Monthly fees per merchant for ten months.
        pm = node(_with_month, p, name="with_month")
        pa_ = node(_with_merchant, pm, m, name="with_merchant")
        fa = node(_applicable_fees, f, name="applicable_fees")
        # Table 4.4 gives DAG 3 2 preprocessing and 12 compute nodes but a total of 15; the
        # total is kept: the applicable-rules node and nine months make 10 compute nodes.
        for month in range(1, 10):
            node(_fees_in_month(month), pa_, fa, name=f"fees_month{month}")
    else:
        # Amount and fraud profiles of one merchant's payments by several keys.
        pm = node(_with_month, p, name="with_month")
        one = node(_filter_eq("merchant", "Merchant_03"), pm, name="merchant")
        for key in ("card_scheme", "aci", "issuing_country", "month", "hour_of_day", "is_credit"):
            node(_fraud_rate_by(key), one, name=f"fraud_{key}")
            node(_avg_amount_by(key), one, name=f"amount_{key}")
    return dag


def build_all(paths: dict[str, str], cache: DeCache | None = None) -> DAG:
    """All five DAGs as one workload (disjoint graphs, each with its own load nodes: with a
    DeCache the fifteen loads share three decodes)."""
    dag = DAG("dabstep-all")
    for number in DAGS:
        build(number, paths, cache, dag)
    return dag
