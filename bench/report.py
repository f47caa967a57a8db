"""The table `make bench` prints: one row per figure, beside its same-run baseline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = tuple[str, str, str, str, str]


def _accept(r: dict[str, Any], name: str) -> Row:
    a = r[name]
    clients, _, keyed = name.removeprefix("accept_").partition("_")
    label = f"accept, {clients} clients, " + (
        "keyed (a new Idempotency-Key each)" if keyed else "unkeyed"
    )
    return (label,
            f"{a['per_second']:.0f}/s (p50 {a['p50_ms']:.1f} ms, p99 {a['p99_ms']:.1f} ms; "
            f"API CPU {a['cpu_ms_per_accept']:.2f} ms/accept)",
            f"pgbench {a['pgbench_tps']:.0f} tps", f"{a['ratio']:.2f}", ">= 0.6")  # fmt: skip


def _bare(r: dict[str, Any], name: str) -> Row:
    a = r[name]
    bare = a["bare_asgi"]
    label = "accept's CPU, 32 clients, " + ("keyed" if "keyed" in name else "unkeyed")
    return (label, f"API {a['cpu_ms_per_accept']:.2f} ms/accept, {a['per_second']:.0f}/s",
            f"bare ASGI app, same statement: {bare['cpu_ms_per_accept']:.2f} ms, "
            f"{bare['per_second']:.0f}/s", f"{a['per_second'] / bare['per_second']:.2f}",
            "<= 0.5 ms and >= 0.7")  # fmt: skip


def _e2e(r: dict[str, Any], name: str, label: str, goal: str) -> Row:
    e = r[name]
    batching = ""
    if e["engine_counters"]["claims"]:
        batching = (f"; {e['rows_per_claim']:.1f} rows/claim, "
                    f"{e['outcomes_per_flush']:.1f} outcomes/flush")  # fmt: skip
    # An instant receiver answers each request before it reads the next: only a slow one can
    # show how many were in flight.
    seen = e["max_in_flight_seen"]
    mean = e["mean_in_flight_seen"]
    at_once = f"; {mean:.0f} at once on average, at most {seen}" if seen > 1 else ""
    cpu = e.get("cpu_ms_per_delivery")
    cpu_text = ""
    if cpu is not None:
        cpu_text = "; CPU ms/delivery: " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
    return (label, f"{e['per_second']:.0f}/s ({e['deliveries']}; first request to last answer "
            f"{e['steady_per_second']:.0f}/s{at_once}{batching}{cpu_text})",
            f"raw aiohttp {e['raw_per_second']:.0f}/s", f"{e['ratio']:.2f}", goal)  # fmt: skip


def _batch(r: dict[str, Any]) -> Row:
    batch = r["batch"]
    return ("accept, batch of 1000", f"{batch['per_second']:.0f} intents/s",
            f"same SQL from asyncpg {batch['sql_per_second']:.0f}/s",
            f"{batch['per_second'] / batch['sql_per_second']:.2f}", ">= 20000/s")  # fmt: skip


def _latency(r: dict[str, Any]) -> Row:
    p = r["latency_200_per_s"]
    if "raw_p50_ms" not in p:  # recorded before the baseline was measured
        return ("accept-to-receipt at 200/s", f"p50 {p['p50_ms']:.1f} ms, p99 {p['p99_ms']:.1f} ms",
                "-", "-", "p50 <= 10, p99 <= 50 ms")  # fmt: skip
    stages = "; ".join(f"{name} p50 {t['p50_ms']:.1f} / p99 {t['p99_ms']:.1f}"
                       for name, t in p.get("stages", {}).items())  # fmt: skip
    return ("accept-to-receipt at 200/s", f"p50 {p['p50_ms']:.1f} ms, p99 {p['p99_ms']:.1f} ms"
            f" ({stages})", f"raw loop to the receiver: p50 {p['raw_p50_ms']:.1f} ms, p99 {p['raw_p99_ms']:.1f} ms",
            f"{p['p50_ms'] / p['raw_p50_ms']:.1f} / {p['p99_ms'] / p['raw_p99_ms']:.1f}",
            "p50 <= 10, p99 <= 50 ms, or <= 2x raw")  # fmt: skip


def _counts(c: dict[str, int]) -> str:
    return (f"Redis keys {c['redis_keys']}, wake entries {c['wake_entries']}, "
            f"delivery jobs {c['delivery_jobs']}, outbox wake-ups {c['outbox_rows']}")  # fmt: skip


def _work(c: dict[str, float]) -> str:
    """What the workers' counters say they did."""
    return (f"{c['claims']:.0f} claims, {c['attempts']:.0f} attempts, "
            f"{c['deferrals']:.0f} deferrals")  # fmt: skip


def _parked(r: dict[str, Any]) -> Row:
    p = r["parked"]
    return (f"{p['deliveries']} behind 429 Retry-After 3600, reconcile every 2 s for "
            f"{p['seconds']:.0f} s ({p['reconcile_runs']} runs)",
            f"after: {_counts(p['after'])}; workers {p['worker_cpu_percent']:.1f} % of a core; "
            f"in the window {_work(p['engine_counters'])}",
            f"before: {_counts(p['before'])}; idle workers "
            f"{p['idle_worker_cpu_percent']:.1f} %", "-", "no growth; < 5 % of a core")  # fmt: skip


def _in_flight_1(r: dict[str, Any]) -> Row:
    f = r["in_flight_1"]
    return (f"{f['deliveries']} behind max_in_flight 1, 2 s receiver",
            f"workers {f['worker_cpu_percent']:.1f} % of a core; slot in use "
            f"{f['slot_utilisation']:.2f} of {f['wall_seconds']:.1f} s; "
            f"at most {f['max_concurrent']} at once; {_work(f['engine_counters'])}",
            f"idle workers {f['idle_worker_cpu_percent']:.1f} % of a core", "-",
            "< 5 % of a core; slot never idle (~1.0)")  # fmt: skip


def _reconcile(r: dict[str, Any], name: str) -> Row:
    c = r[name]
    where = "" if c["destinations"] == 1 else f" over {c['destinations']} destinations"
    whole = "" if c["complete"] else " (INCOMPLETE)"
    return (f"reconcile {c['rows']} rows{where} (Redis flushed)",
            f"{c['seconds']:.2f} s, RSS +{c['rss_growth_mb']:.0f} MB; "
            f"{c['repaired']} destinations armed{whole}", "-", "-", "<= 10 s, <= 64 MB")  # fmt: skip


def _hot(r: dict[str, Any]) -> Row:
    h = r["hot_updates"]
    return ("HOT updates of deliveries, e2e runs",
            f"{100 * h['ratio']:.0f} % (n_tup_hot_upd {h['hot']} / n_tup_upd {h['updates']})",
            "-", "-", "- (plan: ~60-66 %)")  # fmt: skip


def _rss(r: dict[str, Any]) -> Row:
    rss = ", ".join(f"{k}: {v:.0f} MB" for k, v in r["worker_rss_mb"].items())
    return ("worker RSS by backlog", rss, "-", "-", "flat within 10%")


def _scale_out(r: dict[str, Any]) -> Row:
    s = r["scale_out"]
    return (f"scale out: 2 API + 3 workers, {s['deliveries']} posted singly while delivered",
            f"{s['per_second']:.0f} deliveries/s; CPU per intent: API {s['api_cpu_ms']:.2f} ms, "
            f"workers {s['worker_cpu_ms']:.2f} ms",
            f"1 API + 1 worker {s['baseline']['per_second']:.0f}/s (API "
            f"{s['baseline']['api_cpu_ms']:.2f} ms, worker {s['baseline']['worker_cpu_ms']:.2f} ms)",
            f"{s['ratio']:.2f}",
            "~1 on 2 cores: no collapse")  # fmt: skip


def _fleet_on(r: dict[str, Any], shape: str, what: str) -> Row:
    s = r["scale_out"]
    c = s[shape]
    if c is None:  # --servers embedded: no cluster nor standby to make
        return (f"scale out on {what}", "not run", "-", "-", "~1 on 2 cores")
    return (f"scale out: the same fleet on {what}",
            f"{c['per_second']:.0f} deliveries/s; CPU per intent: API {c['api_cpu_ms']:.2f} ms, "
            f"workers {c['worker_cpu_ms']:.2f} ms; {c['reads_per_second']:.0f} reads/s beside, "
            f"{c['replica_share']:.0%} from a replica, {c['read_errors']} 5xx",
            f"one Redis, no replica {s['per_second']:.0f}/s",
            f"{c['per_second'] / s['per_second']:.2f}", "~1 on 2 cores")  # fmt: skip


def _console(r: dict[str, Any]) -> Row:
    c = r["console"]
    pages = ", ".join(f"{name} {ms:.0f} ms" for name, ms in c["pages_ms"].items())
    return (f"console pages over {c['deliveries']} deliveries (median of {c['renders']})", pages,
            f"GET /v1/deliveries?limit=50 {c['api_list_ms']:.0f} ms", "-",
            "fast at a million (keyset pages)")  # fmt: skip


def _programs(r: dict[str, Any]) -> Row:
    p = r["programs"]
    return ("tenant programs at their budget (the costliest filters and schemas, payloads grown "
            "to their bound)", f"slowest {p['worst_ms']:.2f} ms; at most "
            f"{p['worst_ns_per_step']:.2f} ns a bounded step ({p['worst_program']})",
            f"budget {p['budget_steps']:,} steps", f"{p['worst_ns_per_step']:.2f}",
            "< 1 ns a step: the bound holds")  # fmt: skip


def _transformations(r: dict[str, Any]) -> Row:
    p = r["programs"]
    return ("a transformation's cost per delivery at its budget (cold, payload made CEL's; "
            "bench/programs.py)", f"slowest {p['transformation_worst_ms']:.2f} ms, "
            f"{p['transformation_worst_ns_per_step']:.3f} ns a bounded step",
            f"filters, same run: slowest {p['filter_worst_ms']:.2f} ms, "
            f"{p['filter_worst_ns_per_step']:.3f} ns a step",
            f"{p['transformation_worst_ms'] / p['filter_worst_ms']:.2f}",
            "<= the filters' (ratio <= 1)")  # fmt: skip


def _polling(r: dict[str, Any]) -> Row:
    p = r["polling"]
    return (f"polling: poll + ack, {p['page']} a page, {p['pollers']} pollers "
            "(bench/polling.py)", f"{p['per_second']:.0f}/s",
            f"e2e push, instant receiver, same run: {p['push_per_second']:.0f}/s",
            f"{p['ratio']:.2f}", ">= 0.8")  # fmt: skip


def _ordered_keys(r: dict[str, Any]) -> Row:
    o = r["ordered_keys"]
    return (f"ordered: {o['keys']} keys x {o['per_key']} to one endpoint",
            f"{o['per_second']:.0f}/s ({o['rows_per_claim']:.1f} rows/claim, "
            f"{o['outcomes_per_flush']:.1f} outcomes/flush; {o['reorders']} reorders)",
            f"the same unordered {o['unordered_per_second']:.0f}/s", f"{o['ratio']:.2f}",
            ">= 0.8; 0 reorders")  # fmt: skip


def _ordered_one_key(r: dict[str, Any]) -> Row:
    o = r["ordered_one_key"]
    return (f"ordered: one key, {o['deliveries']} to an instant receiver",
            f"{o['per_second']:.0f}/s; answer to next request {o['mean_gap_ms']:.2f} ms "
            f"(start to start p50 {o['start_to_start_p50_ms']:.2f}, "
            f"p99 {o['start_to_start_p99_ms']:.2f} ms); {o['reorders']} reorders",
            f"1 / (raw request {1000 / o['raw_per_second']:.2f} ms + record "
            f"{o['record_ms']:.2f} ms) = {o['best_per_second']:.0f}/s (record leasing the next: "
            f"{o['record_leasing_ms']:.2f} ms, ratio {o['ratio_to_leasing_record']:.2f})",
            f"{o['ratio']:.2f}", ">= 0.8")  # fmt: skip


def _ordered_halted(r: dict[str, Any]) -> Row:
    h = r["ordered_halted"]
    return (f"{h['streams']} halted streams, {h['waiting']} waiting, reconcile every 2 s for "
            f"{h['seconds']:.0f} s ({h['reconcile_runs']} runs)",
            f"after: {_counts(h['after'])}; workers {h['worker_cpu_percent']:.1f} % of a core; "
            f"in the window {_work(h['engine_counters'])}, "
            f"{h['requests_in_window']} requests",
            f"before: {_counts(h['before'])}; idle workers "
            f"{h['idle_worker_cpu_percent']:.1f} %", "-", "no growth; < 5 % of a core")  # fmt: skip


def _credentials(r: dict[str, Any]) -> Row:
    c = r["credentials"]
    return ("an attempt's headers with sealed credentials (v1 secret + a secret header)",
            f"{c['cached_us']:.1f} us opened from the cache ({c['uncached_us']:.1f} us the "
            f"first time); v1a instead of v1 {c['v1a_us']:.1f} us; a cached OAuth2 token "
            f"{c['oauth2_cached_us']:.1f} us", f"plain-text secrets {c['plain_us']:.1f} us",
            f"{c['ratio']:.2f}", "decryption not measurable per attempt")  # fmt: skip


def _mtls(r: dict[str, Any]) -> Row:
    m = r["credentials"]["mtls"]
    return ("an attempt over mutual TLS (client certificate required; pooled / new connection)",
            f"{m['mtls_pooled_us']:.0f} us / {m['mtls_new_connection_us']:.0f} us; its TLS "
            f"context {m['context_cached_us']:.1f} us from the cache ({m['context_first_ms']:.1f} "
            f"ms the first time)",
            f"TLS without a client certificate {m['tls_pooled_us']:.0f} us / "
            f"{m['tls_new_connection_us']:.0f} us",
            f"{m['pooled_ratio']:.2f} / {m['new_connection_ratio']:.2f}",
            "pooled: none; a handshake's signature per new connection")  # fmt: skip


def _isolation(r: dict[str, Any], attack: str, label: str) -> Row:
    beside = r["isolation"][attack]
    alone = beside["alone"]
    attacker = ", ".join(f"{n} x {status}" for status, n in beside["attacker_answers"].items())
    return (f"quiet tenant beside {label}, attacker granted {beside['attacker_rate']:g}/s",
            f"accept p50 {beside['accept_p50_ms']:.1f} / p95 {beside['accept_p95_ms']:.1f} ms, "
            f"receipt p50 {beside['receipt_p50_ms']:.1f} / p95 {beside['receipt_p95_ms']:.1f} ms, "
            f"{beside['refused']} refused, {beside['lost']} lost (attacker: {attacker or '-'}); "
            f"CPU: API {beside['api_cpu_percent']:.0f} %, workers {beside['worker_cpu_percent']:.0f} %",
            f"alone: accept p95 {alone['accept_p95_ms']:.1f} ms, receipt p50 "
            f"{alone['receipt_p50_ms']:.1f} ms; CPU: API {alone['api_cpu_percent']:.0f} %, "
            f"workers {alone['worker_cpu_percent']:.0f} %",
            f"{beside['accept_p95_ratio']:.2f} / {beside['receipt_p50_ratio']:.2f}",
            "<= 1.5 (accept p95 / receipt p50)")  # fmt: skip


def _event_types(r: dict[str, Any]) -> Row:
    t = r["isolation"]["event_types"]
    return ("batch of 1,000 intents of 1,000 event types", f"{t['many_types_ms']:.0f} ms",
            f"1,000 of one type {t['one_type_ms']:.0f} ms",
            f"{t['many_types_ms'] / t['one_type_ms']:.2f}", "one catalogue read a batch")  # fmt: skip


def _write_cost(r: dict[str, Any], path: str, label: str) -> Row:
    w = r["write_costs"][path]
    tables = ", ".join(
        f"{name} {sum(t[k] for k in ('inserted', 'updated', 'deleted')):.2f}"
        for name, t in w["by_table"].items()
        if any(t.values())
    )
    return (label, f"{w['wal_bytes_per_delivery'] / 1024:.1f} KB WAL, "
            f"{w['rows_per_delivery']:.1f} rows ({tables})", "-", "-",
            "<= 2.2 KB, <= 5 rows")  # fmt: skip


def _history(r: dict[str, Any], figure: str, label: str) -> Row:
    h = r["history"]
    full, empty = h["full"][figure], h["empty"][figure]
    value = full if isinstance(full, float) else full["per_second"]
    base = empty if isinstance(empty, float) else empty["per_second"]
    return (f"{label}, {h['rows'] / 1e6:.0f} M rows behind", f"{value:.0f}/s",
            f"empty database {base:.0f}/s", f"{value / base:.2f}", ">= 0.9")  # fmt: skip


def _retire(r: dict[str, Any]) -> Row:
    h = r["history"]
    drop, delete = h["retire_one_day"]["drop"], h["retire_one_day"]["delete"]
    return (f"retiring one day of {h['rows'] / 1e6:.0f} M rows (loaded in "
            f"{h['load_seconds']:.0f} s)", f"dropped: {drop['seconds'] * 1000:.0f} ms, "
            f"{drop['wal_mb']:.2f} MB WAL, {drop['rows']:,} rows",
            f"batched DELETE of the next day: {delete['seconds']:.1f} s, "
            f"{delete['wal_mb']:.0f} MB WAL, {delete['rows']:,} rows",
            f"{delete['seconds'] / max(drop['seconds'], 1e-9):.0f}x faster",
            "a partition drop: ms")  # fmt: skip


def _replica(r: dict[str, Any]) -> Row:
    p = r["replica_reads"]
    reads, by = p["reads"], p["by_replica"]
    later = sum(reads.get(k, 0) for k in ("status", "listing"))
    return ("status and listings from a streaming replica, under accepts and deliveries",
            f"{p['share_of_status_and_listings']:.1%} of {later:,} answered by the replica; "
            f"{p['replica_transactions_beyond_probes']:,.0f} transactions there; just-accepted "
            f"status: {by.get('just accepted', 0):,} of {reads.get('just accepted', 0):,} "
            f"there, {p['stale_404']} answered 404",
            "-", "-", ">= 95 %, 0 stale 404s")  # fmt: skip


def _cluster(r: dict[str, Any], what: str, label: str) -> Row:
    c = r["redis_cluster"]
    herald, single = c[f"{what}_per_second"], c["single"][f"{what}_per_second"]
    return (f"{label}, flow on a 3-master Redis Cluster", f"{herald:,.0f}/s",
            f"one Redis {single:,.0f}/s", f"{herald / single:.2f}", ">= 0.9")  # fmt: skip


def _cluster_spread(r: dict[str, Any]) -> Row:
    c = r["redis_cluster"]
    s = c["spread"]
    return ("Redis Cluster: keys and commands", f"{c['commands_per_delivery']:.1f} commands a "
            f"delivery (one Redis {c['single']['commands_per_delivery']:.1f}); busiest master "
            f"{c['busiest_master_share']:.0%} of them, {c['busiest_master_cpu_us']:.0f} us of its CPU "
            f"a delivery (a full core at {c['busiest_master_full_at']:,.0f}/s); "
            f"{s['slots_used']} slots hold 1,000 "
            f"destinations' keys, at most {s['most_keys_in_a_slot']} in one",
            f"keys per master {s['keys_per_master']}", f"{s['max_over_mean_master']:.2f}",
            "max master <= 2x mean")  # fmt: skip


ROWS: list[tuple[str, Callable[[dict[str, Any]], Row]]] = [
    ("accept_32", lambda r: _accept(r, "accept_32")),
    ("accept_64", lambda r: _accept(r, "accept_64")),
    ("accept_32_keyed", lambda r: _accept(r, "accept_32_keyed")),
    ("accept_64_keyed", lambda r: _accept(r, "accept_64_keyed")),
    ("accept_32", lambda r: _bare(r, "accept_32")),
    ("accept_32_keyed", lambda r: _bare(r, "accept_32_keyed")),
    ("batch", _batch),
    ("e2e_instant", lambda r: _e2e(r, "e2e_instant", "e2e, instant receiver", ">= 0.5")),
    ("e2e_50ms", lambda r: _e2e(r, "e2e_50ms", "e2e, 50 ms receiver, 200 in flight", ">= 0.8")),
    (
        "e2e_payload_classes",
        lambda r: _e2e(
            r,
            "e2e_payload_classes",
            "e2e, instant receiver, payloads kept a day (days ahead split)",
            ">= 0.5",
        ),
    ),
    ("hot_updates", _hot),
    ("latency_200_per_s", _latency),
    ("parked", _parked),
    ("in_flight_1", _in_flight_1),
    ("reconcile", lambda r: _reconcile(r, "reconcile")),
    ("reconcile_spread", lambda r: _reconcile(r, "reconcile_spread")),
    ("worker_rss_mb", _rss),
    ("scale_out", _scale_out),
    ("scale_out", lambda r: _fleet_on(r, "on_cluster", "a 3-master Redis Cluster")),
    ("scale_out", lambda r: _fleet_on(r, "on_replica", "a streaming replica")),
    ("scale_out", lambda r: _fleet_on(r, "on_cluster_and_replica", "a cluster and a replica")),
    ("console", _console),
    ("programs", _programs),
    ("programs", _transformations),
    ("polling", _polling),
    ("ordered_keys", _ordered_keys),
    ("ordered_one_key", _ordered_one_key),
    ("ordered_halted", _ordered_halted),
    ("credentials", _credentials),
    ("credentials", _mtls),
    ("isolation", lambda r: _isolation(r, "batches", "1,000-item batches x3")),
    ("isolation", lambda r: _isolation(r, "fanned_events", "events to 100 filtered endpoints")),
    ("isolation", lambda r: _isolation(r, "half_open", "half-open connections")),
    ("isolation", lambda r: _isolation(r, "batches_most_of_the_machine", "1,000-item batches x3")),
    ("isolation", _event_types),
    ("write_costs", lambda r: _write_cost(r, "batch_1000", "primary's cost, batch of 1000")),
    ("write_costs", lambda r: _write_cost(r, "single_keyed", "primary's cost, single keyed")),
    ("history", lambda r: _history(r, "accept_32", "accept, 32 clients")),
    ("history", lambda r: _history(r, "accept_32_keyed", "accept keyed, 32 clients")),
    ("history", lambda r: _history(r, "deliver_per_second", "delivered (claim, send, record)")),
    ("history", lambda r: _history(r, "status_by_id", "status by id, 32 clients")),
    ("history", _retire),
    ("replica_reads", _replica),
    ("redis_cluster", lambda r: _cluster(r, "accept", "accept, 32 clients")),
    ("redis_cluster", lambda r: _cluster(r, "e2e", "e2e, instant receiver")),
    ("redis_cluster", _cluster_spread),
]


def table(results: dict[str, Any]) -> str:
    shape = results["shape"]
    rows: list[Row] = [
        ("process shape", shape["description"], "-", "-", "what a user runs on 2 cores"),
        *(row(results) for name, row in ROWS if name in results),
    ]
    head: Row = ("figure", "Herald", "baseline (same run)", "ratio", "goal")
    width = [max(len(row[i]) for row in [head, *rows]) for i in range(5)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(head, width, strict=True))]
    lines.append("-+-".join("-" * w for w in width))
    lines += [" | ".join(c.ljust(w) for c, w in zip(row, width, strict=True)) for row in rows]
    return "\n".join(lines)
