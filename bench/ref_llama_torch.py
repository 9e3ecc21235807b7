#!/usr/bin/python3
"""Reference for train_step_bench: a Llama-shaped decoder (RMSNorm, RoPE in Hugging Face's
rotate_half convention, grouped-query attention, SwiGLU, tied embeddings) trained with PyTorch
(Debian python3-torch) on the CPU, written from Hugging Face's LlamaForCausalLM. Prints the
tokens/s of forward + backward + AdamW as one JSON line.

Usage: ref_llama_torch.py [--layers 4 --dim 128 --heads 4 --kv-heads 2 --ffn 352 --ctx 128
                           --vocab 2048 --batch 16 --steps 20 --threads 1]"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
for k, v in dict(layers=4, dim=128, heads=4, kv_heads=2, ffn=352, ctx=128, vocab=2048, batch=16,
                 steps=20, threads=1).items():
    p.add_argument("--" + k.replace("_", "-"), type=int, default=v)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
D = a.dim // a.heads


class RMSNorm(nn.Module):
    def __init__(self, n, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    return torch.cat((-x[..., D // 2:], x[..., :D // 2]), dim=-1)


inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
freqs = torch.arange(a.ctx).float()[:, None] * inv_freq[None, :]
emb = torch.cat((freqs, freqs), dim=-1)
cos, sin = emb.cos(), emb.sin()
mask = torch.full((a.ctx, a.ctx), float("-inf")).triu(1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = RMSNorm(a.dim), RMSNorm(a.dim)
        self.q = nn.Linear(a.dim, a.heads * D, bias=False)
        self.k = nn.Linear(a.dim, a.kv_heads * D, bias=False)
        self.v = nn.Linear(a.dim, a.kv_heads * D, bias=False)
        self.o = nn.Linear(a.heads * D, a.dim, bias=False)
        self.gate = nn.Linear(a.dim, a.ffn, bias=False)
        self.up = nn.Linear(a.dim, a.ffn, bias=False)
        self.down = nn.Linear(a.ffn, a.dim, bias=False)

    def forward(self, x):
        B, T, C = x.shape
        h = self.ln1(x)
        q = self.q(h).view(B, T, a.heads, D).transpose(1, 2)
        k = self.k(h).view(B, T, a.kv_heads, D).transpose(1, 2)
        v = self.v(h).view(B, T, a.kv_heads, D).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(a.heads // a.kv_heads, dim=1)
        v = v.repeat_interleave(a.heads // a.kv_heads, dim=1)
        att = (q @ k.transpose(-2, -1) / math.sqrt(D) + mask).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(B, T, a.heads * D))
        h = self.ln2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.dim)
        self.blocks = nn.ModuleList([Block() for _ in range(a.layers)])
        self.norm = RMSNorm(a.dim)

    def forward(self, idx, tgt):
        x = self.embed(idx)
        for b in self.blocks:
            x = b(x)
        logits = self.norm(x) @ self.embed.weight.t()
        return F.cross_entropy(logits.view(-1, a.vocab), tgt.view(-1))


m = Llama()
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
nparams = sum(t.numel() for t in m.parameters())
x = torch.randint(0, a.vocab, (a.batch, a.ctx))
y = torch.randint(0, a.vocab, (a.batch, a.ctx))


def step():
    opt.zero_grad(set_to_none=True)
    loss = m(x, y)
    loss.backward()
    opt.step()


for _ in range(3):
    step()
t0 = time.perf_counter()
for _ in range(a.steps):
    step()
dt = (time.perf_counter() - t0) / a.steps
print(f'{{"ref":"pytorch-{torch.__version__}","params":{nparams},"step_s":{dt:.4f},'
      f'"tokens_per_s":{a.batch * a.ctx / dt:.1f},"threads":{a.threads}}}')
