#!/usr/bin/env python3
"""Write a Q8_0 GGUF (arch "deepseek2", as ik_llama.cpp expects) straight from the
DeepSeek-V3-format bench slice (fp8 e4m3 weights + 128x128 weight_scale_inv blocks).

Why not convert_hf_to_gguf.py: it needs torch and transformers, neither of which is
installable here, and it cannot read fp8 + scale_inv. This script needs only numpy and
ik_llama.cpp's own gguf-py (pass its path via PYTHONPATH). It streams one tensor at a
time (memory-mapped safetensors), dequantizes fp8 * block scale, rounds to bf16 (as a
bf16 HF copy would be), then quantizes to Q8_0 with gguf-py. Tensor names, dtypes and
metadata follow what convert_hf_to_gguf.py --outtype q8_0 emits for DeepseekV3ForCausalLM:
norms, ffn_gate_inp and exp_probs_b in F32, everything else Q8_0; routed experts stacked
into 3-D ffn_{gate,up,down}_exps.

Usage: PYTHONPATH=<ik_llama.cpp>/gguf-py python3 make_gguf.py <hf_dir> <out.gguf>
"""
import json, struct, sys
from pathlib import Path
import numpy as np
import gguf

src, out = Path(sys.argv[1]), sys.argv[2]
cfg = json.loads((src / "config.json").read_text())
Q8, F32 = gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32

# ---- safetensors, memory-mapped -------------------------------------------------
DT = {"F8_E4M3": np.uint8, "BF16": np.uint16, "F32": np.float32}
index = {}  # name -> (file, dtype, shape, offset)
for f in sorted(src.glob("*.safetensors")):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        hdr = json.loads(fh.read(n))
    for k, v in hdr.items():
        if k != "__metadata__":
            index[k] = (f, v["dtype"], v["shape"], 8 + n + v["data_offsets"][0])

def raw(name):
    f, dt, shape, off = index[name]
    return np.memmap(f, dtype=DT[dt], mode="r", offset=off, shape=tuple(shape))

def e4m3_table():  # float8_e4m3fn -> float32
    t = np.zeros(256, np.float32)
    for b in range(256):
        s, e, m = (b >> 7) & 1, (b >> 3) & 15, b & 7
        v = np.nan if (e == 15 and m == 7) else (m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0**(e - 7))
        t[b] = -v if s else v
    return t
E4M3 = e4m3_table()

def to_bf16(x):  # round-to-nearest-even to bf16, kept as float32
    u = x.view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.view(np.float32)

def rows_f32(name, r0, r1):
    """Rows [r0, r1) of tensor `name` as float32 (fp8 dequantized with its block scales)."""
    _, dt, shape, _ = index[name]
    a = raw(name)[r0:r1]
    if dt == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    if dt == "F32":
        return np.array(a, np.float32)
    s = raw(name + "_scale_inv")  # [ceil(rows/128), ceil(cols/128)]
    b0 = r0 // 128
    sc = np.repeat(np.repeat(s[b0:(r1 - 1) // 128 + 1], 128, 0), 128, 1)
    sc = sc[r0 - b0 * 128:r1 - b0 * 128, :shape[1]]
    return to_bf16(E4M3[a] * sc)

# ---- tensor plan: gguf name -> (list of HF names stacked on axis 0, ggml type) --------
L = cfg["num_hidden_layers"]
plan = {"token_embd.weight": (["model.embed_tokens.weight"], Q8)}
att = {"q_a_proj": "attn_q_a", "q_b_proj": "attn_q_b", "kv_a_proj_with_mqa": "attn_kv_a_mqa",
       "kv_b_proj": "attn_kv_b", "o_proj": "attn_output",
       "q_a_layernorm": "attn_q_a_norm", "kv_a_layernorm": "attn_kv_a_norm"}
for i in range(L):
    p, b = f"model.layers.{i}.", f"blk.{i}."
    plan[b + "attn_norm.weight"] = ([p + "input_layernorm.weight"], F32)
    for hf, g in att.items():
        plan[b + g + ".weight"] = ([p + f"self_attn.{hf}.weight"], F32 if g.endswith("norm") else Q8)
    plan[b + "ffn_norm.weight"] = ([p + "post_attention_layernorm.weight"], F32)
    for w in ("gate", "up", "down"):
        if i < cfg["first_k_dense_replace"]:
            plan[b + f"ffn_{w}.weight"] = ([p + f"mlp.{w}_proj.weight"], Q8)
        else:
            plan[b + f"ffn_{w}_exps.weight"] = (
                [p + f"mlp.experts.{e}.{w}_proj.weight" for e in range(cfg["n_routed_experts"])], Q8)
            plan[b + f"ffn_{w}_shexp.weight"] = ([p + f"mlp.shared_experts.{w}_proj.weight"], Q8)
    if i >= cfg["first_k_dense_replace"]:
        plan[b + "ffn_gate_inp.weight"] = ([p + "mlp.gate.weight"], F32)
        plan[b + "exp_probs_b.bias"] = ([p + "mlp.gate.e_score_correction_bias"], F32)
plan["output_norm.weight"] = (["model.norm.weight"], F32)
plan["output.weight"] = (["lm_head.weight"], Q8)

# ---- metadata (same keys as convert_hf_to_gguf.py DeepseekV2Model) ------------------
w = gguf.GGUFWriter(out, "deepseek2")
w.add_name("dsinfer-bench-slice")
w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
w.add_quantization_version(gguf.GGML_QUANT_VERSION)
w.add_block_count(L)
w.add_context_length(cfg["max_position_embeddings"])
w.add_embedding_length(cfg["hidden_size"])
w.add_feed_forward_length(cfg["intermediate_size"])
w.add_head_count(cfg["num_attention_heads"])
w.add_head_count_kv(cfg["num_key_value_heads"])
w.add_rope_freq_base(cfg["rope_theta"])
w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
w.add_expert_used_count(cfg["num_experts_per_tok"])
w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
w.add_vocab_size(cfg["vocab_size"])
w.add_q_lora_rank(cfg["q_lora_rank"])
w.add_kv_lora_rank(cfg["kv_lora_rank"])
w.add_key_length(cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"])
w.add_value_length(cfg["v_head_dim"])
w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
w.add_expert_count(cfg["n_routed_experts"])
w.add_expert_shared_count(cfg["n_shared_experts"])
w.add_expert_weights_scale(cfg["routed_scaling_factor"])
w.add_expert_weights_norm(cfg["norm_topk_prob"])
w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
w.add_rope_dimension_count(cfg["qk_rope_head_dim"])
rs = cfg["rope_scaling"]
w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
w.add_rope_scaling_factor(rs["factor"])
w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
w.add_rope_scaling_yarn_log_mul(0.1 * rs["mscale_all_dim"])

# tokenizer: what convert_hf_to_gguf.py's get_vocab_base() builds via transformers,
# read directly from tokenizer.json (BPE vocab + added tokens), pre-tokenizer "deepseek-v3"
tok = json.loads((src / "tokenizer.json").read_text())
added = {a["id"]: a for a in tok["added_tokens"]}
rev = {i: t for t, i in tok["model"]["vocab"].items()}
rev.update({i: a["content"] for i, a in added.items()})
tokens, types = [], []
for i in range(cfg["vocab_size"]):
    t = rev.get(i)
    if t is None:
        tokens.append(f"[PAD{i}]"); types.append(gguf.TokenType.UNUSED)
    elif i in added:
        special = added[i]["special"] or (t.startswith("<｜") and t.endswith("｜>"))
        tokens.append(t if special else t.replace("\u2581", " "))
        types.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
    else:
        tokens.append(t); types.append(gguf.TokenType.NORMAL)
w.add_tokenizer_model("gpt2")
w.add_tokenizer_pre("deepseek-v3")
w.add_token_list(tokens)
w.add_token_types(types)
gguf.SpecialVocab(src, load_merges=True).add_to_gguf(w)  # merges, bos/eos ids, add_bos

# ---- tensors: declare all, then stream data one tensor (row chunk) at a time ----------
def out_shape(names, qt):
    shape = list(index[names[0]][2])
    if len(names) > 1:
        shape = [len(names)] + shape
    if qt == Q8:
        shape[-1] = shape[-1] // 32 * 34  # byte shape of Q8_0 rows
        return shape, np.uint8
    return shape, np.float32

for gname, (names, qt) in plan.items():
    shape, dt = out_shape(names, qt)
    w.add_tensor_info(gname, shape, np.dtype(dt), int(np.prod(shape)) * np.dtype(dt).itemsize, raw_dtype=qt)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_ti_data_to_file()
fout = w.fout[0]
CH = 4096
for gname, (names, qt) in plan.items():
    w.tensors[0].pop(gname)
    w.write_padding(fout, fout.tell())
    nbytes = 0
    for n in names:
        rows = index[n][2][0]
        for r0 in range(0, rows, CH):
            x = rows_f32(n, r0, min(rows, r0 + CH))
            y = gguf.quants.quantize(x, Q8) if qt == Q8 else x.astype(np.float32)
            y.tofile(fout); nbytes += y.nbytes
    w.write_padding(fout, nbytes)
    print(f"{gname:32s} {qt.name:5s} {[n for n in index[names[0]][2]]} x{len(names)}", flush=True)
w.close()
print("wrote", out)
