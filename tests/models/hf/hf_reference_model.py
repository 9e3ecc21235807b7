#!/usr/bin/env python3
"""Random-weight Hugging Face checkpoints of the Llama family, and their forward pass in
PyTorch written from Hugging Face's modeling conventions (transformers' LlamaForCausalLM,
MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM, without transformers itself): the
independent reference troupe's decoder is checked against (tests/models/hf/hf_model_test.cpp).

    hf_reference_model.py make ARCH OUT_DIR [--dtype f32|bf16] [--shards N] [--seed S]
        [--vocab V] [--untied] [--eos ID ...] [--gptq BITS [--group-size G]]
    hf_reference_model.py forward MODEL_DIR TOKENS OUT [--generate N]
    hf_reference_model.py stop-after MODEL_DIR TOKENS EOS
    hf_reference_model.py grads MODEL_DIR SEQUENCES OUT

`make` writes config.json, generation_config.json and model.safetensors (or N shards and
model.safetensors.index.json) for ARCH (llama, mistral, qwen2 or qwen3, each small and with
its family's options); --untied gives it an output head of its own, --eos its end-of-sequence
ids (a real tokenizer's), --gptq a GPTQ checkpoint of it: each block's linear weights quantized
asymmetrically to BITS (4 or 8) in groups of G inputs (-1: a whole row), min-max round-to-nearest
as GPTQ's quantizer, packed as AutoGPTQ packs them (qweight, qzeros holding zero - 1, F16 scales,
g_idx). Every reader here dequantizes a GPTQ checkpoint back to f32 weights by that format's
formula, w = scale * (q - (stored zero + 1)). `forward` runs the model over TOKENS (comma-separated ids) and writes
{"logits": [[...] per position], "generated": [greedy ids], "hidden_last": the final norm's
output at the last token, "hidden_mean": its mean over the tokens} as JSON. `stop-after` edits an
untied checkpoint's output head so that a greedy continuation of TOKENS says EOS after a few
tokens of its own, as a trained model ends its turn (the row of EOS becomes 1.5 times the row of
a token the continuation would say), and prints how many tokens come before it. `grads` takes
sequences (comma-separated ids, sequences separated by '/'), the mean next-token cross entropy
over all of them, and its gradient by autograd: OUT gets the gradients as an f32 safetensors
file under the weights' names, with the loss in its metadata.

"""
import argparse
import json
import math
import os
import struct

import torch

ARCHS = {
    # Llama 3.1's rope scaling (with a short original context, so that the blend is exercised).
    "llama": dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64,
                  intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5,
                  rope_theta=500000.0, tie_word_embeddings=False, attention_bias=False,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 64},
                  hidden_act="silu", eos_token_id=[1, 2], bos_token_id=0),
    "mistral": dict(architectures=["MistralForCausalLM"], model_type="mistral", hidden_size=64,
                    intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=1, max_position_embeddings=256, rms_norm_eps=1e-5,
                    rope_theta=1000000.0, tie_word_embeddings=False, sliding_window=None,
                    hidden_act="silu", eos_token_id=2, bos_token_id=1),
    "qwen2": dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=64,
                  intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6,
                  rope_theta=1000000.0, tie_word_embeddings=True, use_sliding_window=False,
                  sliding_window=32, rope_scaling={"type": "linear", "factor": 2.0},
                  hidden_act="silu", eos_token_id=2, bos_token_id=1),
    # An explicit head_dim whose heads are wider than hidden_size, and per-head q/k norms.
    "qwen3": dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", hidden_size=64,
                  intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                  rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
                  attention_bias=False, use_sliding_window=False, sliding_window=None,
                  hidden_act="silu", eos_token_id=2, bos_token_id=1),
}


def tensor_names(c):
    """(name, shape) of every weight, as transformers names them."""
    C, F, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    D = c.get("head_dim") or C // c["num_attention_heads"]
    Q, KV = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
    qkv_bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
    o_bias = c.get("attention_bias", False)
    out = [("model.embed_tokens.weight", [V, C])]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out.append((p + "input_layernorm.weight", [C]))
        out.append((p + "self_attn.q_proj.weight", [Q, C]))
        if qkv_bias:
            out.append((p + "self_attn.q_proj.bias", [Q]))
        out.append((p + "self_attn.k_proj.weight", [KV, C]))
        if qkv_bias:
            out.append((p + "self_attn.k_proj.bias", [KV]))
        out.append((p + "self_attn.v_proj.weight", [KV, C]))
        if qkv_bias:
            out.append((p + "self_attn.v_proj.bias", [KV]))
        out.append((p + "self_attn.o_proj.weight", [C, Q]))
        if o_bias:
            out.append((p + "self_attn.o_proj.bias", [C]))
        if c["model_type"] == "qwen3":
            out.append((p + "self_attn.q_norm.weight", [D]))
            out.append((p + "self_attn.k_norm.weight", [D]))
        out.append((p + "post_attention_layernorm.weight", [C]))
        out.append((p + "mlp.gate_proj.weight", [F, C]))
        out.append((p + "mlp.up_proj.weight", [F, C]))
        out.append((p + "mlp.down_proj.weight", [C, F]))
    out.append(("model.norm.weight", [C]))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", [V, C]))
    return out


def write_safetensors(path, tensors, dtype, metadata=None):
    header, blobs, offset = {}, [], 0
    for name, t in tensors:
        if t.dtype == torch.int32:
            kind, data = "I32", t.contiguous().numpy().tobytes()
        elif t.dtype == torch.float16:
            kind, data = "F16", t.contiguous().view(torch.int16).numpy().tobytes()
        elif dtype == "bf16":
            kind = "BF16"
            data = t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
        else:
            kind, data = "F32", t.to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": kind, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt", **(metadata or {})}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def make(args):
    c = dict(ARCHS[args.arch])
    c["vocab_size"] = args.vocab
    if args.untied:
        c["tie_word_embeddings"] = False
    if args.eos:
        c["eos_token_id"] = args.eos
    c["torch_dtype"] = "bfloat16" if args.dtype == "bf16" else "float32"
    g = torch.Generator().manual_seed(args.seed)
    tensors = []
    for name, shape in tensor_names(c):
        if name.endswith("norm.weight"):  # near 1, as trained norms are
            t = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=g)
        else:  # large enough that the next token is clear
            t = torch.randn(shape, generator=g) / math.sqrt(shape[-1]) * 2.0
        tensors.append((name, t))
    if args.gptq:
        tensors = gptq_quantize(tensors, args.gptq, args.group_size)
        c["quantization_config"] = {"quant_method": "gptq", "bits": args.gptq,
                                    "group_size": args.group_size, "desc_act": False,
                                    "sym": False, "checkpoint_format": "gptq"}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": c["bos_token_id"], "eos_token_id": c["eos_token_id"]}, f)
    if args.shards <= 1:
        write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, args.dtype)
        return
    per = math.ceil(len(tensors) / args.shards)
    weight_map = {}
    for s in range(args.shards):
        name = f"model-{s + 1:05d}-of-{args.shards:05d}.safetensors"
        part = tensors[s * per:(s + 1) * per]
        write_safetensors(os.path.join(args.out, name), part, args.dtype)
        weight_map.update({n: name for n, _ in part})
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f, indent=2)


LINEAR = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
          "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def gptq_quantize(tensors, bits, group_size):
    """Each block linear weight [out, in] as GPTQ's four tensors (see the module's doc)."""
    maxq, per_word = 2 ** bits - 1, 32 // bits
    out = []
    for name, w in tensors:
        if not (name.startswith("model.layers.") and name.endswith(LINEAR)):
            out.append((name, w))
            continue
        rows, cols = w.shape
        g = cols if group_size == -1 else group_size
        groups = w.reshape(rows, cols // g, g)
        lo = torch.minimum(groups.min(-1).values, torch.zeros(1))
        hi = torch.maximum(groups.max(-1).values, torch.zeros(1))
        scale = ((hi - lo) / maxq).half().float()  # stored in F16; q computed with what is stored
        zero = torch.clamp(torch.round(-lo / scale), 1, maxq)  # 0 cannot be stored as zero - 1
        q = torch.clamp(torch.round(groups / scale[..., None]) + zero[..., None], 0, maxq)
        q = q.reshape(rows, cols).to(torch.int64)  # [out, in]
        qweight = torch.zeros(cols // per_word, rows, dtype=torch.int64)
        for i in range(cols):
            qweight[i // per_word] |= q[:, i] << (bits * (i % per_word))
        stored = (zero.to(torch.int64) - 1).t()  # [groups, out]
        qzeros = torch.zeros(cols // g, rows // per_word, dtype=torch.int64)
        for j in range(rows):
            qzeros[:, j // per_word] |= stored[:, j] << (bits * (j % per_word))
        prefix = name[:-len(".weight")]
        as_int32 = lambda t: (t & 0xFFFFFFFF).to(torch.int64).apply_(
            lambda v: v - (1 << 32) if v >= (1 << 31) else v).to(torch.int32)
        out.append((prefix + ".qweight", as_int32(qweight)))
        out.append((prefix + ".qzeros", as_int32(qzeros)))
        out.append((prefix + ".scales", scale.t().contiguous().half()))
        out.append((prefix + ".g_idx", torch.arange(cols, dtype=torch.int32) // g))
    return out


def gptq_dequantize(c, w):
    """A GPTQ checkpoint's tensors back as f32 weights: w = scale * (q - (stored zero + 1))."""
    q = c.get("quantization_config")
    if not q:
        return w
    assert q["quant_method"] == "gptq" and q.get("checkpoint_format", "gptq") == "gptq"
    bits = q["bits"]
    per_word, mask = 32 // bits, 2 ** bits - 1
    for prefix in [n[:-len(".qweight")] for n in w if n.endswith(".qweight")]:
        qweight = w.pop(prefix + ".qweight").to(torch.int64) & 0xFFFFFFFF
        qzeros = w.pop(prefix + ".qzeros").to(torch.int64) & 0xFFFFFFFF
        scales = w.pop(prefix + ".scales").float()  # [groups, out]
        g_idx = w.pop(prefix + ".g_idx").to(torch.int64)
        cols, rows = qweight.shape[0] * per_word, qweight.shape[1]
        i = torch.arange(cols)
        q = (qweight[i // per_word] >> (bits * (i % per_word))[:, None]) & mask  # [in, out]
        j = torch.arange(rows)
        zeros = ((qzeros[:, j // per_word] >> (bits * (j % per_word))) & mask) + 1  # [groups, out]
        w[prefix + ".weight"] = (scales[g_idx] * (q - zeros[g_idx]).float()).t().contiguous()
    return w


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = bytearray(data[b:end])
        if e["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16).float()
        elif e["dtype"] == "F16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.float16).float()
        elif e["dtype"] == "I32":
            t = torch.frombuffer(raw, dtype=torch.int32).clone()
        else:
            t = torch.frombuffer(raw, dtype=torch.float32).clone()
        out[name] = t.reshape(e["shape"])
    return out


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    index = os.path.join(model_dir, "model.safetensors.index.json")
    w = {}
    if os.path.exists(index):
        with open(index) as f:
            for file in sorted(set(json.load(f)["weight_map"].values())):
                w.update(read_safetensors(os.path.join(model_dir, file)))
    else:
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    return c, gptq_dequantize(c, w)


def inverse_frequencies(c, D):
    """transformers' rope init: default, linear and llama3 (float32 throughout)."""
    inv = 1.0 / (c.get("rope_theta", 10000.0) **
                 (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    s = c.get("rope_scaling")
    kind = (s or {}).get("rope_type", (s or {}).get("type", "default"))
    if kind == "linear":
        inv = inv / s["factor"]
    elif kind == "llama3":
        factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        low_wl, high_wl = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wl, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def rms_norm(x, w, eps):
    x = x.float()
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(c, w, tokens, hidden=False):
    """Logits [T, V] of the model over `tokens`, as the HF model computes them in float32 (with
    `hidden`, the final norm's output [T, C] instead)."""
    C, H, KV = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    D = c.get("head_dim") or C // H
    eps = c["rms_norm_eps"]
    T = len(tokens)
    qkv_bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
    o_bias = c.get("attention_bias", False)
    pos = torch.arange(T)
    freqs = pos[:, None].float() * inverse_frequencies(c, D)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    mask = torch.full((T, T), float("-inf")).triu(1)
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def proj(name, bias):
            y = h @ w[p + f"self_attn.{name}.weight"].T
            return y + w[p + f"self_attn.{name}.bias"] if bias else y

        q = proj("q_proj", qkv_bias).view(T, H, D)
        k = proj("k_proj", qkv_bias).view(T, KV, D)
        v = proj("v_proj", qkv_bias).view(T, KV, D)
        if c["model_type"] == "qwen3":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=1)  # repeat_kv
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(D) + mask
        probs = torch.softmax(scores.float(), dim=-1)
        attn = torch.einsum("hts,shd->thd", probs, v).reshape(T, H * D)
        o = attn @ w[p + "self_attn.o_proj.weight"].T
        if o_bias:
            o = o + w[p + "self_attn.o_proj.bias"]
        x = x + o
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    if hidden:
        return x
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def run_forward(args):
    c, w = load(args.model)
    tokens = [int(t) for t in args.tokens.split(",")]
    with torch.no_grad():
        logits = forward(c, w, tokens)
        states = forward(c, w, tokens, hidden=True)
        generated = greedy(c, w, tokens, args.generate)
    with open(args.out, "w") as f:
        json.dump({"logits": logits.tolist(), "generated": generated,
                   "hidden_last": states[-1].tolist(), "hidden_mean": states.mean(0).tolist()}, f)


def greedy(c, w, tokens, n):
    seq = list(tokens)
    for _ in range(n):
        seq.append(int(forward(c, w, seq)[-1].argmax()))
    return seq[len(tokens):]


def stop_after(args):
    c, w = load(args.model)
    assert not c["tie_word_embeddings"], "stop-after needs an untied checkpoint (make --untied)"
    tokens = [int(t) for t in args.tokens.split(",")]
    head = w["lm_head.weight"]
    with torch.no_grad():
        said = greedy(c, w, tokens, 6)
        for j in range(2, 6):
            edited = head.clone()
            edited[args.eos] = 1.5 * head[said[j]]
            w["lm_head.weight"] = edited
            out = greedy(c, w, tokens, j + 1)
            if args.eos in out and out.index(args.eos) >= 2:
                break
        else:
            raise SystemExit("no row makes the continuation stop after two tokens or more")
    write_safetensors(os.path.join(args.model, "model.safetensors"), list(w.items()),
                      "bf16" if c["torch_dtype"] == "bfloat16" else "f32")
    print(out.index(args.eos))


def grads(args):
    c, w = load(args.model)
    for t in w.values():
        t.requires_grad_(True)
    sequences = [[int(t) for t in s.split(",")] for s in args.sequences.split("/")]
    total, count = 0.0, 0
    for seq in sequences:
        logits = forward(c, w, seq)
        total = total + torch.nn.functional.cross_entropy(
            logits[:-1], torch.tensor(seq[1:]), reduction="sum")
        count += len(seq) - 1
    loss = total / count
    loss.backward()
    named = [(name, t.grad) for name, t in w.items()]
    write_safetensors(args.out, named, "f32", {"loss": repr(float(loss))})


def main():
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("arch", choices=sorted(ARCHS))
    m.add_argument("out")
    m.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    m.add_argument("--shards", type=int, default=1)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--vocab", type=int, default=96)
    m.add_argument("--untied", action="store_true")
    m.add_argument("--eos", type=int, nargs="+")
    m.add_argument("--gptq", type=int, choices=[4, 8])
    m.add_argument("--group-size", type=int, default=-1)
    f = sub.add_parser("forward")
    f.add_argument("model")
    f.add_argument("tokens")
    f.add_argument("out")
    f.add_argument("--generate", type=int, default=0)
    e = sub.add_parser("stop-after")
    e.add_argument("model")
    e.add_argument("tokens")
    e.add_argument("eos", type=int)
    g = sub.add_parser("grads")
    g.add_argument("model")
    g.add_argument("sequences")
    g.add_argument("out")
    args = parser.parse_args()
    {"make": make, "forward": run_forward, "stop-after": stop_after,
     "grads": grads}[args.command](args)


if __name__ == "__main__":
    main()
