"""troupe's GPT in PyTorch (Debian python3-torch), for the benchmarks' baselines: pre-LN blocks,
tanh GELU, the output tied to the token embedding, or a scalar value head on the same trunk
(the RL critic's, the reward model's), and GPT-2's initialisation. `shape` is anything with
vocab, ctx, dim, heads and layers (the scripts' argparse namespace)."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(s, shape):
        super().__init__()
        s.heads = shape.heads
        d = shape.dim
        s.ln1 = nn.LayerNorm(d); s.qkv = nn.Linear(d, 3 * d); s.proj = nn.Linear(d, d)
        s.ln2 = nn.LayerNorm(d); s.fc = nn.Linear(d, 4 * d); s.fc2 = nn.Linear(4 * d, d)

    def forward(s, x, mask, cache=None):
        """x [B, T, C]; mask [B, 1, T, S] (True: attend); cache: (k, v) of earlier positions."""
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, 2)
        q, k, v = [t.view(B, T, s.heads, C // s.heads).transpose(1, 2) for t in (q, k, v)]
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // s.heads)
        att = att.masked_fill(~mask, float('-inf')).softmax(-1)
        x = x + s.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate='tanh')), (k, v)


class GPT(nn.Module):
    def __init__(s, shape, value_head=False):
        super().__init__()
        s.wte = nn.Embedding(shape.vocab, shape.dim); s.wpe = nn.Embedding(shape.ctx, shape.dim)
        s.blocks = nn.ModuleList([Block(shape) for _ in range(shape.layers)])
        s.lnf = nn.LayerNorm(shape.dim)
        s.value = nn.Linear(shape.dim, 1) if value_head else None

    def forward(s, idx, pos, mask, caches=None):
        x = s.wte(idx) + s.wpe(pos)
        new = []
        for i, b in enumerate(s.blocks):
            x, kv = b(x, mask, None if caches is None else caches[i])
            new.append(kv)
        x = s.lnf(x)
        out = s.value(x).squeeze(-1) if s.value is not None else x @ s.wte.weight.t()
        return out, new


def gpt2_init(model):
    """troupe's (GPT-2's) initialisation: weights N(0, 0.02), biases 0, norms 1 and 0."""
    for name, q in model.named_parameters():
        if name.endswith('bias'):
            nn.init.zeros_(q)
        elif '.ln' in name or name.startswith('ln'):
            nn.init.ones_(q)
        else:
            nn.init.normal_(q, std=0.02)
    return model
