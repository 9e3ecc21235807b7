#!/usr/bin/python3
"""Writes the PyTorch reference for troupe's GPT: a small model's weights (under GPT-2's Hugging
Face names, linear weights stored [in, out] as in GPT-2's Conv1D), a batch, the loss and every
gradient, as one safetensors file. The model is the one in ../shared/tools/ref_gpt_torch.py.

Usage: make_gpt_fixture.py OUT.safetensors     (Debian python3-torch; run with /usr/bin/python3)
"""
import json, math, struct, sys
import torch, torch.nn as nn, torch.nn.functional as F

L, D, H, T, V, B, SEQ = 2, 32, 4, 16, 64, 3, 13  # SEQ < ctx: positions past SEQ stay unused
torch.manual_seed(1234)

class Block(nn.Module):
    def __init__(s):
        super().__init__(); s.ln1 = nn.LayerNorm(D); s.qkv = nn.Linear(D, 3 * D); s.proj = nn.Linear(D, D)
        s.ln2 = nn.LayerNorm(D); s.fc = nn.Linear(D, 4 * D); s.fc2 = nn.Linear(4 * D, D)
    def forward(s, x):
        b, t, c = x.shape; q, k, v = s.qkv(s.ln1(x)).split(c, 2)
        q, k, v = [z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // H)
        att = att.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float('-inf')).softmax(-1)
        x = x + s.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        return x + s.fc2(F.gelu(s.fc(s.ln2(x)), approximate='tanh'))

class GPT(nn.Module):
    def __init__(s):
        super().__init__(); s.wte = nn.Embedding(V, D); s.wpe = nn.Embedding(T, D)
        s.blocks = nn.ModuleList([Block() for _ in range(L)]); s.lnf = nn.LayerNorm(D)
    def forward(s, idx, tgt):
        x = s.wte(idx) + s.wpe(torch.arange(idx.shape[1]))
        for blk in s.blocks: x = blk(x)
        logits = s.lnf(x) @ s.wte.weight.t()
        return F.cross_entropy(logits.view(-1, V), tgt.view(-1), ignore_index=-1)

m = GPT()
with torch.no_grad():  # non-trivial norms and biases, so their gradients are checked too
    for name, p in m.named_parameters():
        if 'ln' in name or name.endswith('bias'): p.add_(0.1 * torch.randn_like(p))
        if name.startswith('w'): p.mul_(0.3)  # embeddings of N(0, 0.3): a loss near log(vocab)
idx = torch.randint(0, V, (B, SEQ)); tgt = torch.randint(0, V, (B, SEQ)); tgt[1, 4] = -1
loss = m(idx, tgt); loss.backward()

def hf(p):  # (troupe/HF name, tensor in HF layout)
    out = [('wte.weight', p['wte.weight']), ('wpe.weight', p['wpe.weight'])]
    for i in range(L):
        b = f'blocks.{i}.'; h = f'h.{i}.'
        for ours, theirs in [('ln_1', 'ln1'), ('ln_2', 'ln2')]:
            out += [(h + ours + '.weight', p[b + theirs + '.weight']), (h + ours + '.bias', p[b + theirs + '.bias'])]
        for ours, theirs in [('attn.c_attn', 'qkv'), ('attn.c_proj', 'proj'), ('mlp.c_fc', 'fc'), ('mlp.c_proj', 'fc2')]:
            out += [(h + ours + '.weight', p[b + theirs + '.weight'].t()), (h + ours + '.bias', p[b + theirs + '.bias'])]
    return out + [('ln_f.weight', p['lnf.weight']), ('ln_f.bias', p['lnf.bias'])]

params = {n: p.detach() for n, p in m.named_parameters()}
grads = {n: p.grad for n, p in m.named_parameters()}
tensors = [('param.' + n, t) for n, t in hf(params)] + [('grad.' + n, t) for n, t in hf(grads)]
tensors += [('tokens', idx.int()), ('targets', tgt.int()), ('loss', loss.detach().reshape(1))]

# safetensors, written by hand: 8-byte little-endian header length, JSON header, raw data.
header, blobs, offset = {'__metadata__': {'config': json.dumps(dict(layers=L, dim=D, heads=H, ctx=T, vocab=V))}}, [], 0
for name, t in tensors:
    t = t.contiguous(); data = t.numpy().tobytes()
    header[name] = {'dtype': {torch.float32: 'F32', torch.int32: 'I32'}[t.dtype], 'shape': list(t.shape),
                    'data_offsets': [offset, offset + len(data)]}
    blobs.append(data); offset += len(data)
text = json.dumps(header).encode(); text += b' ' * (-len(text) % 8)
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(text))); f.write(text); [f.write(b) for b in blobs]
print(f'{sys.argv[1]}: loss {loss.item():.6f}, {len(tensors)} tensors, {8 + len(text) + offset} bytes')
