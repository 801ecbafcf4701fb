#!/usr/bin/env python3
"""A cost model of tensor-parallel decode across machines, fitted to bench/scale_out.sh's runs,
checked against them, then used to project DeepSeek-V3 671B at mp16 over 2 x 8 ranks.

  scripts/scale_model.py OUT [OUT...]        (bench/scale_out.sh's OUT: rows.tsv, comm.tsv; pooled)
  scripts/scale_model.py OUT --markdown      (the projection as README markdown)

The model, per decode step of batch 1 (one token), at world size p over two machines:
  step = compute + collectives(0) + calls x cross(p) x d + wire bytes / rate
  compute, collectives(0): the emulated run without delay (its step time minus its time in
    collectives, and that time, which holds the software's cost per call and the wait for the
    slowest rank);
  trips(p): one-way messages per collective on the critical path, fitted from bench-comm's
    all_reduce over the relay at 2 ranks without and with COMM_DELAY (its slope per microsecond of
    delay: ~2 per step, data and gloo's notifications), scaled to p by the algorithm's steps (ring
    2 (p - 1), halving-doubling 2 log2 p); cross(p): those that cross machines (ring: all of them;
    halving-doubling with ranks in blocks per machine: 2 log2(machines) steps' worth, whatever p);
  d: the one-way delay; wire bytes over the slowest link at the htb rate.
Checked against every delayed and rate-limited run (prints the error; the issue asks for ~20%).

The projection: V3 671B (configs/config_671B.json, fp8, scripts/model_sizes.py's bytes) at mp16,
2 machines x 8 ranks, batch 1. Compute per step = the busiest rank's weight bytes / (per-rank read
bandwidth x efficiency): the 1/16 share of everything but the routed experts, plus per MoE layer
the routed experts of the busiest rank (8 of 256 chosen uniformly, 16 per rank: the expected maximum
load, computed exactly). Collectives: 123 all_reduces of 7168 floats and one all_gather of the
logits, each costing trips(16) x alpha + cross(16) x d + wire / rate, with alpha the software's cost per trip
(bench-comm's all_reduce without delay / its trips: this VM's gloo over the relay, vCPU wake-ups
included; --alpha-us overrides it) and d the real network's one-way delay (--net-delay-us).
"""
import argparse
import math
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_sizes  # noqa: E402

FLOAT = 4  # collectives carry fp32


def read_rows(path):
    rows = []
    for line in open(path):
        world, delay, rate, rtt, tps, ms, coll, calls = line.rstrip("\n").split("\t")
        rows.append(dict(world=int(world), delay=delay, rate=rate, rtt=rtt, tps=float(tps), ms=float(ms),
                         coll=float(coll), calls=float(calls)))
    return rows


def read_comm(path):
    """{delay us: [all_reduce median us, ...]} of bench-comm over the relay at 2 ranks."""
    out = defaultdict(list)
    if os.path.exists(path):
        for line in open(path):
            world, delay, rate, rtt, us = line.rstrip("\n").split("\t")
            out[float(delay)].append(float(us))
    return out


def rate_bytes_per_us(rate):
    """'25gbit' -> bytes per microsecond."""
    assert rate.endswith("gbit"), rate
    return float(rate[:-4]) * 1e9 / 8 / 1e6


def hops(world, algorithm):
    """Sequential steps of one all_reduce."""
    return 2 * (world - 1) if algorithm == "ring" else 2 * math.ceil(math.log2(world))


def cross_hops(world, algorithm, hosts=2):
    """Those of them whose slowest exchange crosses machines, ranks placed in blocks per machine
    (ranks 0..k-1 on the first): every ring step has a link that crosses; halving-doubling
    exchanges with rank ^ 2^i, which crosses only for the log2(hosts) largest distances, once in
    the reduce-scatter and once in the all-gather."""
    if algorithm == "ring":
        return hops(world, algorithm)
    return 2 * math.ceil(math.log2(hosts))


def step_collectives(config, world):
    """(all_reduces, all_gathers, wire bytes over the slowest link) of one batch-1 decode step."""
    m = model_sizes.read_config(config)
    reduces, gathers = 1 + 2 * m["layers"], 1
    wire = reduces * m["dim"] * FLOAT * 2 * (world - 1) / world + gathers * (m["vocab"] // world) * FLOAT * (world - 1)
    return reduces, gathers, wire


def fit_trips(comm):
    """(one-way trips per all_reduce at 2 ranks, alpha us per trip) from bench-comm over the relay."""
    delays = sorted(comm)
    if len(delays) < 2 or delays[0] != 0:
        sys.exit("error: comm.tsv needs bench-comm rows without delay and with one (bench/scale_out.sh PARTS=comm)")
    median = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    l0, ld, d = median(comm[0]), median(comm[delays[-1]]), delays[-1]
    trips = (ld - l0) / d
    return trips, l0 / trips


def fit_and_check(rows, config, trips2, algorithm):
    by = defaultdict(list)
    for r in rows:
        by[(r["world"], r["delay"], r["rate"])].append(r)
    mean = lambda rs, k: sum(r[k] for r in rs) / len(rs)  # noqa: E731
    fits, checks = {}, []
    for world in sorted({r["world"] for r in rows if r["world"] > 1}):
        base = [v for (w, d, rate), v in by.items() if w == world and d == "0"]
        if not base:
            continue
        base = base[0]
        reduces, gathers, wire = step_collectives(config, world)
        per_hop = trips2 / hops(2, algorithm)  # one-way messages per step (data, and notifications)
        trips, cross = per_hop * hops(world, algorithm), per_hop * cross_hops(world, algorithm)
        calls = reduces + gathers
        coll0 = 1e3 * mean(base, "coll")
        compute = 1e3 * mean(base, "ms") - coll0
        wire0 = wire / rate_bytes_per_us(base[0]["rate"])
        fits[world] = dict(compute_us=compute, coll0_us=coll0, trips=trips, cross=cross, calls=calls)
        for (w, d, rate), rs in by.items():
            if w != world or d in ("-", "loopback"):
                continue
            pred_coll = coll0 + calls * cross * float(d) + wire / rate_bytes_per_us(rate) - wire0
            checks.append(dict(world=w, delay=d, rate=rate, coll=1e3 * mean(rs, "coll"), pred_coll=pred_coll,
                               tps=mean(rs, "tps"), pred_tps=1e6 / (compute + pred_coll)))
    return fits, checks


def expected_max_load(balls, bins):
    """E[experts on the busiest rank] when `balls` distinct experts of 256 are chosen uniformly and
    each of `bins` ranks holds 256 / bins of them: sum over k of P(max > k), P(max <= k) counted
    exactly by polynomial multiplication."""
    per_bin = 256 // bins  # V3: 256 routed experts

    def count_at_most(k):
        # ways to choose `balls` experts with at most k from each bin: coefficient of x^balls in
        # (sum_{j<=k} C(per_bin, j) x^j)^bins
        poly = [1]
        term = [math.comb(per_bin, j) for j in range(min(k, per_bin) + 1)]
        for _ in range(bins):
            nxt = [0] * min(balls + 1, len(poly) + len(term) - 1)
            for i, a in enumerate(poly):
                for j, b in enumerate(term):
                    if i + j < len(nxt):
                        nxt[i + j] += a * b
            poly = nxt
        return poly[balls] if balls < len(poly) else 0

    total = math.comb(per_bin * bins, balls)
    return sum(1 - count_at_most(k) / total for k in range(balls))


def project(config, trips2, alpha, bandwidths, rates, delay_us, efficiency, world=16):
    m = model_sizes.read_config(config)
    _, per_token, routed = model_sizes.sizes(m, False, False)
    moe_layers = m["layers"] - m["dense"]
    routed_one_layer = routed / m["active"] / moe_layers
    max_load = expected_max_load(m["active"], world)
    per_rank_bytes = (per_token - routed) / world + moe_layers * max_load * routed_one_layer
    reduces, gathers, wire = step_collectives(config, world)
    out = []
    for bw in bandwidths:
        compute_us = per_rank_bytes / (bw * 1e3 * efficiency)  # bw GB/s = 1e3 bytes/us
        for rate in rates:
            for algorithm in ("ring", "halving-doubling"):
                per_hop = trips2 / hops(2, algorithm)
                trips, cross = per_hop * hops(world, algorithm), per_hop * cross_hops(world, algorithm)
                coll = (reduces + gathers) * (trips * alpha + cross * delay_us) + wire / rate_bytes_per_us(rate)
                out.append(dict(bw=bw, rate=rate, algorithm=algorithm, compute_ms=compute_us / 1e3,
                                coll_ms=coll / 1e3, tps=1e6 / (compute_us + coll)))
    return out, per_rank_bytes, max_load, reduces


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="+", help="bench/scale_out.sh's OUT directories (rows.tsv, comm.tsv; several are pooled)")
    ap.add_argument("--slice-config", default="configs/bench_v3_slice.json")
    ap.add_argument("--config", default="configs/config_671B.json")
    ap.add_argument("--algorithm", default="halving-doubling", help="what the emulated runs used (gloo auto at decode sizes)")
    ap.add_argument("--rank-bw", default="25,50,100", help="per-rank read bandwidth, GB/s (comma-separated)")
    ap.add_argument("--rates", default="25gbit,100gbit")
    ap.add_argument("--net-delay-us", type=float, default=10.0, help="the real network's one-way delay")
    ap.add_argument("--alpha-us", type=float, default=None, help="software cost per trip (default: fitted here)")
    ap.add_argument("--efficiency", type=float, default=0.8, help="decode's fraction of the read bandwidth")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    comm = defaultdict(list)
    rows = []
    for out in a.out:
        for delay, v in read_comm(os.path.join(out, "comm.tsv")).items():
            comm[delay] += v
        if os.path.exists(os.path.join(out, "rows.tsv")):
            rows += read_rows(os.path.join(out, "rows.tsv"))
    trips2, alpha_fit = fit_trips(comm)
    alpha = alpha_fit if a.alpha_us is None else a.alpha_us
    print(f"bench-comm over the relay, 2 ranks: {trips2:.2f} one-way trips per all_reduce, {alpha_fit:.1f} us of "
          f"software per trip")
    fits, checks = fit_and_check(rows, a.slice_config, trips2, a.algorithm)
    if not fits:
        sys.exit("error: no emulated decode run without delay (delay 0) in " + " ".join(a.out))
    print("decode runs without delay: " + "; ".join(
        f"{w} ranks: compute {f['compute_us'] / 1e3:.1f} ms, collectives {f['coll0_us'] / 1e3:.1f} ms per step "
        f"({f['calls']} calls x {f['trips']:.1f} trips, {f['cross']:.1f} of them across machines)"
        for w, f in sorted(fits.items())))
    print("\ncheck against every emulated run:")
    print(f"{'ranks':>5} {'delay us':>8} {'rate':>8} {'coll ms':>8} {'model':>8} {'tok/s':>7} {'model':>7} {'error':>6}")
    worst = 0.0
    for c in checks:
        err = c["pred_tps"] / c["tps"] - 1
        worst = max(worst, abs(err))
        print(f"{c['world']:>5} {c['delay']:>8} {c['rate']:>8} {c['coll'] / 1e3:8.2f} {c['pred_coll'] / 1e3:8.2f} "
              f"{c['tps']:7.2f} {c['pred_tps']:7.2f} {100 * err:+5.1f}%")
    print(f"worst tokens/s error {100 * worst:.1f}%")
    proj, per_rank, max_load, reduces = project(
        a.config, trips2, alpha, [float(x) for x in a.rank_bw.split(",")], a.rates.split(","), a.net_delay_us,
        a.efficiency)
    print(f"\nprojection: {a.config} at mp16 over 2 x 8 ranks, batch 1: {per_rank / 1e9:.2f} GB read per rank per token "
          f"(busiest rank: {max_load:.2f} of the 8 experts per MoE layer), {reduces} all_reduces + 1 all_gather per "
          f"token, alpha {alpha:.1f} us per trip, one-way delay {a.net_delay_us:g} us, efficiency {a.efficiency:g}")
    if a.markdown:
        print("\n| per-rank read GB/s | network | all_reduce | compute ms | collectives ms | tokens/s |")
        print("|---|---|---|---|---|---|")
        for p in proj:
            print(f"| {p['bw']:g} | {p['rate']} | {p['algorithm']} | {p['compute_ms']:.1f} | {p['coll_ms']:.1f} | {p['tps']:.2f} |")
    else:
        print(f"{'rank GB/s':>9} {'network':>8} {'all_reduce':>17} {'compute ms':>10} {'coll ms':>8} {'tok/s':>6}")
        for p in proj:
            print(f"{p['bw']:9g} {p['rate']:>8} {p['algorithm']:>17} {p['compute_ms']:10.1f} {p['coll_ms']:8.1f} {p['tps']:6.2f}")


if __name__ == "__main__":
    main()
