#!/usr/bin/env python3
"""The GPU baseline of gpu_bench's training row: the same GPT (GPT-2 124M shape by default) in
PyTorch on CUDA, bf16 autocast with fp32 master weights, fused AdamW, flash attention through
scaled_dot_product_attention. Prints one JSON line with tokens_per_s. Runs on the device machine,
which has PyTorch. Usage: ref_gpt_cuda_torch.py [--batch 8 --steps 10]"""
import argparse, json, time, torch, torch.nn as nn, torch.nn.functional as F
p = argparse.ArgumentParser()
for k, v in dict(layers=12, dim=768, heads=12, ctx=1024, vocab=50304, batch=8, steps=10).items():
    p.add_argument('--' + k, type=int, default=v)
a = p.parse_args()
torch.manual_seed(0)
class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.ln1 = nn.LayerNorm(a.dim); s.qkv = nn.Linear(a.dim, 3 * a.dim); s.proj = nn.Linear(a.dim, a.dim)
        s.ln2 = nn.LayerNorm(a.dim); s.fc = nn.Linear(a.dim, 4 * a.dim); s.fc2 = nn.Linear(4 * a.dim, a.dim)
    def forward(s, x):
        B, T, C = x.shape; q, k, v = s.qkv(s.ln1(x)).split(C, 2)
        q, k, v = [t.view(B, T, a.heads, C // a.heads).transpose(1, 2) for t in (q, k, v)]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate='tanh'))
class GPT(nn.Module):
    def __init__(s):
        super().__init__(); s.wte = nn.Embedding(a.vocab, a.dim); s.wpe = nn.Embedding(a.ctx, a.dim)
        s.blocks = nn.ModuleList([Block() for _ in range(a.layers)]); s.lnf = nn.LayerNorm(a.dim)
    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in s.blocks: x = b(x)
        return F.cross_entropy((s.lnf(x) @ s.wte.weight.t()).view(-1, a.vocab).float(), tgt.view(-1))
m = GPT().cuda(); opt = torch.optim.AdamW(m.parameters(), lr=6e-4, fused=True)
x = torch.randint(0, 50257, (a.batch, a.ctx), device='cuda'); y = torch.randint(0, 50257, (a.batch, a.ctx), device='cuda')
def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast('cuda', dtype=torch.bfloat16): loss = m(x, y)
    loss.backward(); opt.step()
for _ in range(3): step()
torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(a.steps): step()
torch.cuda.synchronize(); dt = (time.perf_counter() - t0) / a.steps
print(json.dumps({"ref": f"pytorch-{torch.__version__}", "tokens_per_s": a.batch * a.ctx / dt, "batch": a.batch}))
