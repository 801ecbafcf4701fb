#!/usr/bin/env python3
"""Stored size and weight bytes read per decode token of a DeepSeek model in each of convert's
formats, computed from a config (the reference's configs/config_*.json or an HF config.json).

  scripts/model_sizes.py configs/config_671B.json configs/config_236B.json configs/config_16B.json
  scripts/model_sizes.py --markdown configs/*.json

Formats: as converted (fp8 linears with fp32 128x128 block scales when the config says dtype fp8,
else bf16), --experts-int4 (routed experts' w1/w2/w3: 16 bytes per 32 columns + one fp16 scale per
row per 128 columns), --int8 (bf16 checkpoints: every linear weight 1 byte + one fp16 scale per row
per 128 columns), and both. Embedding, router, norms stay bf16 (router bias fp32). The MTP layer,
which convert drops, is not counted. Per token: every weight but the routed experts, plus the
n_activated_experts routed ones a token uses, plus one embedding row (batch 1). Sizes in GB (1e9 bytes).
Kept in step with WeightMatrix::bytes() (src/kernels/weight_matrix.cpp); the slice's shard sizes
check it (tests: none; bench/README.md shows the comparison).
"""
import json
import math
import sys


def cdiv(a, b):
    return (a + b - 1) // b


def read_config(path):
    c = json.load(open(path))
    if "hidden_size" in c:  # HF form
        return dict(vocab=c["vocab_size"], dim=c["hidden_size"], inter=c["intermediate_size"],
                    moe_inter=c["moe_intermediate_size"], layers=c["num_hidden_layers"],
                    dense=c.get("first_k_dense_replace", 0), heads=c["num_attention_heads"],
                    experts=c["n_routed_experts"], shared=c.get("n_shared_experts", 0),
                    active=c["num_experts_per_tok"], q_lora=c.get("q_lora_rank") or 0,
                    kv_lora=c["kv_lora_rank"], nope=c["qk_nope_head_dim"], rope=c["qk_rope_head_dim"],
                    v=c["v_head_dim"], fp8="quantization_config" in c,
                    bias=c.get("topk_method") == "noaux_tc")
    return dict(vocab=c["vocab_size"], dim=c["dim"], inter=c["inter_dim"], moe_inter=c["moe_inter_dim"],
                layers=c["n_layers"], dense=c.get("n_dense_layers", 1), heads=c["n_heads"],
                experts=c["n_routed_experts"], shared=c.get("n_shared_experts", 2),
                active=c["n_activated_experts"], q_lora=c.get("q_lora_rank", 0), kv_lora=c["kv_lora_rank"],
                nope=c["qk_nope_head_dim"], rope=c["qk_rope_head_dim"], v=c["v_head_dim"],
                fp8=c.get("dtype") == "fp8", bias=c.get("dim") == 7168)


def linear_bytes(rows, cols, fmt):
    if fmt == "fp8":
        return rows * cols + cdiv(rows, 128) * cdiv(cols, 128) * 4
    if fmt == "bf16":
        return rows * cols * 2
    if fmt == "int8":
        return rows * cols + rows * cdiv(cols, 128) * 2
    if fmt == "int4":
        return rows * cdiv(cols, 32) * 16 + rows * cdiv(cols, 128) * 2
    raise ValueError(fmt)


def sizes(m, experts_int4, int8):
    native = "fp8" if m["fp8"] else "bf16"
    other = "int8" if int8 else native
    expert = "int4" if experts_int4 else other
    d, H = m["dim"], m["heads"]
    fixed = 2 * m["vocab"] * d  # embedding (bf16)
    fixed += linear_bytes(m["vocab"], d, "int8") if int8 else 2 * m["vocab"] * d  # head
    fixed += 2 * d  # final norm
    routed_one = 0
    for layer in range(m["layers"]):
        b = 4 * d  # two norms
        if m["q_lora"]:
            b += linear_bytes(m["q_lora"], d, other) + 2 * m["q_lora"] + linear_bytes(H * (m["nope"] + m["rope"]), m["q_lora"], other)
        else:
            b += linear_bytes(H * (m["nope"] + m["rope"]), d, other)
        b += linear_bytes(m["kv_lora"] + m["rope"], d, other) + 2 * m["kv_lora"]
        b += linear_bytes(H * (m["nope"] + m["v"]), m["kv_lora"], other) + linear_bytes(d, H * m["v"], other)
        if layer < m["dense"]:
            b += 2 * linear_bytes(m["inter"], d, other) + linear_bytes(d, m["inter"], other)
        else:
            b += 2 * m["experts"] * d + (4 * m["experts"] if m["bias"] else 0)
            s = m["shared"] * m["moe_inter"]
            if s:
                b += 2 * linear_bytes(s, d, other) + linear_bytes(d, s, other)
            one = 2 * linear_bytes(m["moe_inter"], d, expert) + linear_bytes(d, m["moe_inter"], expert)
            routed_one += one
        fixed += b
    total = fixed + m["experts"] * routed_one
    per_token = fixed - 2 * m["vocab"] * d + 2 * d + m["active"] * routed_one
    return total, per_token, m["active"] * routed_one


def main(argv):
    markdown = "--markdown" in argv
    paths = [a for a in argv if not a.startswith("--")]
    rows = []
    for path in paths:
        m = read_config(path)
        formats = [("as converted (" + ("fp8" if m["fp8"] else "bf16") + ")", False, False), ("--experts-int4", True, False)]
        if not m["fp8"]:
            formats += [("--int8", False, True), ("--int8 --experts-int4", True, True)]
        base = sizes(m, False, False)
        for name, e4, i8 in formats:
            total, per_token, routed = sizes(m, e4, i8)
            rows.append((path, name, total / 1e9, per_token / 1e9, routed / 1e9, base[1] / per_token))
    if markdown:
        print("| config | format | stored GB | GB read per token | of which routed experts | decode speed-up if bandwidth-bound |")
        print("|---|---|---|---|---|---|")
        for p, name, t, pt, r, up in rows:
            print(f"| {p} | {name} | {t:.1f} | {pt:.2f} | {r:.2f} | {up:.2f}x |")
    else:
        for p, name, t, pt, r, up in rows:
            print(f"{p:32s} {name:28s} {t:8.1f} GB stored  {pt:7.2f} GB/token ({r:.2f} routed)  x{up:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
