#!/usr/bin/python3
"""The baseline of bench/align_bench: a reward model's and a DPO policy's training steps as a
single PyTorch script (Debian python3-torch) would write them, on troupe's GPT
(bench/torch_gpt.py) and the same batch shape as troupe's `configs/align/{rm,dpo}.yaml`.

A batch is `pairs` preference pairs, two rows of `ctx` tokens each (prompt + chosen, prompt +
rejected: random bytes, each sequence of a random length past a `prompt`-byte prompt, padded).
- Reward model (TRL's RewardTrainer): the value head's output at each sequence's last token,
  the mean Bradley-Terry loss -log sigmoid(r_chosen - r_rejected).
- DPO (TRL's DPOTrainer, loss_type sigmoid, beta 0.1, the reference's log-probs precomputed as
  precompute_ref_log_probs does): each row's summed log-probs of its response tokens, the mean
  of -log sigmoid(beta ((pi_c - pi_r) - (ref_c - ref_r))).
Each step: forward, loss, backward, gradients clipped at 1, AdamW. Prints one JSON line: the
median step time of each over `steps` steps after one warm-up step.

Usage: ref_align_torch.py [--layers 2 --dim 64 --heads 4 --ctx 32 --pairs 16 --prompt 10
                           --steps 30 --threads 1]"""
import argparse, json, os, random, statistics, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, gpt2_init  # noqa: E402

p = argparse.ArgumentParser()
for k, v in dict(layers=2, dim=64, heads=4, ctx=32, pairs=16, prompt=10, steps=30, threads=1,
                 vocab=256, seed=1).items():
    p.add_argument('--' + k.replace('_', '-'), type=int, default=v)
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
rng = random.Random(a.seed)
BETA = 0.1

rows, T = 2 * a.pairs, a.ctx
tokens = torch.randint(0, a.vocab, (rows, T))
lengths = torch.tensor([rng.randrange(a.prompt + 2, T + 1) for _ in range(rows)])
positions = torch.arange(T)
targets = torch.roll(tokens, -1, 1)
# DPO trains on the positions that predict a response token; the reward model reads the last.
response = (positions >= a.prompt - 1) & (positions < (lengths - 1).unsqueeze(1))
last = lengths - 1
mask = torch.ones(T, T, dtype=torch.bool).tril().view(1, 1, T, T)
pos = positions.unsqueeze(0).expand(rows, T)


def timed(step):
    step()  # warm-up
    times = []
    for _ in range(a.steps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def update(model, opt, loss):
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


rm = gpt2_init(GPT(a, value_head=True))
rm_opt = torch.optim.AdamW(rm.parameters(), lr=1e-3)


def rm_step():
    values, _ = rm(tokens, pos, mask)
    r = values.gather(1, last.unsqueeze(1)).squeeze(1)
    update(rm, rm_opt, -F.logsigmoid(r[0::2] - r[1::2]).mean())


policy = gpt2_init(GPT(a))
dpo_opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)


def sequence_logps(model):
    logits, _ = model(tokens, pos, mask)
    logps = logits.log_softmax(-1).gather(2, targets.unsqueeze(2)).squeeze(2)
    return (logps * response).sum(1)


with torch.no_grad():
    reference = sequence_logps(policy)  # the precomputed reference log-probs


def dpo_step():
    pi = sequence_logps(policy)
    logits = (pi[0::2] - pi[1::2]) - (reference[0::2] - reference[1::2])
    update(policy, dpo_opt, -F.logsigmoid(BETA * logits).mean())


print(json.dumps({"ref": "pytorch-" + torch.__version__, "threads": a.threads,
                  "pairs": a.pairs, "ctx": T, "rm_step_s": timed(rm_step),
                  "dpo_step_s": timed(dpo_step)}))
