#!/usr/bin/python3
"""The baseline of bench/rlhf_bench's end-to-end PPO step: the same step as troupe's
`configs/rlhf_ppo.yaml` written in PyTorch (Debian python3-torch) in one process, as a single
script would do it without an RL framework.

One step, as troupe's (issue 16: generate with a KV cache, score, reference, values, GAE, one
PPO epoch): B digit-completion prompts ("a,b:max,n=", left-padded); generate up to R tokens each
with a KV cache (temperature 1, stopping at the newline, as HF's generate does it), keeping each
sampled token's log-prob as the old log-prob (troupe's default, rollout_correction.bypass_mode,
takes the rollout's too); score each response with the task's dense rule; the reference's
log-probs and the critic's values (at the position before each response token) in one forward
each; the KL penalty in the reward and GAE (veRL's core_algos: whitened advantages); then
`epochs` passes of B / M mini-batches, one AdamW step of the clipped value loss on the critic
and one of the clipped PPO loss (token-mean) on the policy each, gradients clipped at 1.
`--recompute` recomputes the old log-probs with a policy forward instead (veRL's default).

The model is troupe's GPT (pre-LN blocks, tanh GELU, tied output embedding, the critic a value
head on the same trunk), from random weights, so every response runs to R tokens, as troupe's
from-scratch bench run does. Prints one JSON line: the median step time over `steps` steps
after one warm-up step, and its split.

Usage: ref_ppo_torch.py [--layers 2 --dim 64 --heads 4 --ctx 32 --batch 256 --mini-batch 64
                         --epochs 1 --response 15 --steps 5 --threads 1]"""
import argparse, json, math, random, statistics, time
import os, sys
import torch, torch.nn as nn, torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, gpt2_init  # noqa: E402

p = argparse.ArgumentParser()
for k, v in dict(layers=2, dim=64, heads=4, ctx=32, batch=256, mini_batch=64, epochs=1,
                 response=15, steps=5, threads=1, vocab=256, seed=1).items():
    p.add_argument('--' + k.replace('_', '-'), type=int, default=v)
p.add_argument('--recompute', action='store_true')
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)
rng = random.Random(a.seed)
MAX_NUMBER, MAX_DIFF, MAX_NUMS, NEWLINE = 20, 3, 5, ord('\n')
CLIP, CLIP_V, GAMMA, LAM, KL_COEF = 0.2, 0.5, 1.0, 1.0, 0.01


def prompt():
    first = rng.randrange(MAX_NUMBER + 1); diff = rng.randrange(MAX_DIFF + 1)
    return f'{first},{(first + diff) % MAX_NUMBER}:{MAX_NUMBER},{rng.randrange(MAX_NUMS + 1)}='


def score(q, response, ended):
    """The task's dense reward: each matching character earns 1 / (len(answer) + 1) up to the
    first mismatch, and the end right after the whole answer the last share."""
    pair, info = q[:-1].split(':')
    x, y = map(int, pair.split(',')); m, n = map(int, info.split(','))
    d, last, nums = (y - x) % m, y, []
    for _ in range(n):
        last = (last + d) % m; nums.append(str(last))
    want = ','.join(nums); share = 1 / (len(want) + 1); k = 0
    while k < len(want) and k < len(response) and response[k] == want[k]: k += 1
    return share * k + (share if k == len(want) == len(response) and ended else 0)


def causal(valid):
    """[B, 1, T, T] attention mask: causal, and never onto padding (a padding position sees
    itself, so that its softmax is defined)."""
    T = valid.shape[1]
    eye = torch.eye(T, dtype=torch.bool)
    return torch.tril(torch.ones(T, T, dtype=torch.bool)) & (valid[:, None, None, :] | eye)


@torch.no_grad()
def generate(policy, prompts):
    B, P = len(prompts), max(len(q) for q in prompts)
    ids = torch.zeros(B, P, dtype=torch.long); valid = torch.zeros(B, P, dtype=torch.bool)
    for i, q in enumerate(prompts):  # left padding, as HF's generate takes a batch
        ids[i, P - len(q):] = torch.tensor(list(q.encode())); valid[i, P - len(q):] = True
    pos = (valid.cumsum(1) - 1).clamp(min=0)
    logits, caches = policy(ids, pos, causal(valid))
    out = torch.zeros(B, a.response, dtype=torch.long)
    logps = torch.zeros(B, a.response)
    done = torch.zeros(B, dtype=torch.bool); lengths = torch.full((B,), a.response)
    next_pos = pos[:, -1] + 1
    for t in range(a.response):
        logp = logits[:, -1].log_softmax(-1)
        token = torch.multinomial(logp.exp(), 1).squeeze(1)
        token = torch.where(done, torch.zeros_like(token), token)
        out[:, t] = token
        logps[:, t] = logp.gather(1, token[:, None]).squeeze(1)
        ended = (token == NEWLINE) & ~done
        lengths[ended] = t + 1; done |= ended
        if bool(done.all()) or t + 1 == a.response: break
        valid = torch.cat([valid, torch.ones(B, 1, dtype=torch.bool)], 1)
        logits, caches = policy(token[:, None], next_pos[:, None], valid[:, None, None, :], caches)
        next_pos = next_pos + 1
    return ids, out, lengths, logps


def sequence_inputs(ids, out, lengths):
    """The prompt and response as one left-padded sequence: tokens, positions, attention mask
    and the response mask [B, R]."""
    seq = torch.cat([ids, out], 1)
    valid = torch.cat([ids != 0, torch.ones_like(out, dtype=torch.bool)], 1)
    response_mask = torch.arange(a.response)[None, :] < lengths[:, None]
    return seq, (valid.cumsum(1) - 1).clamp(min=0), causal(valid), response_mask.float()


def response_log_probs(policy, seq, pos, mask):
    logits, _ = policy(seq, pos, mask)
    logits = logits[:, -a.response - 1:-1]
    logp = logits.log_softmax(-1)
    return logp.gather(-1, seq[:, -a.response:, None]).squeeze(-1), logp


def masked_mean(x, m):
    return (x * m).sum() / (m.sum() + 1e-8)


def masked_whiten(x, m):
    mean = masked_mean(x, m)
    var = masked_mean((x - mean) ** 2, m) * (m.sum() / (m.sum() - 1))
    return (x - mean) * torch.rsqrt(var + 1e-8)


def gae(rewards, values, m):
    last, adv = 0, []
    for t in reversed(range(a.response)):
        nxt = values[:, t + 1] if t + 1 < a.response else 0.0
        delta = rewards[:, t] + GAMMA * nxt - values[:, t]
        last = delta + GAMMA * LAM * last
        adv.append(last)
    adv = torch.stack(adv[::-1], 1)
    returns = adv + values
    return masked_whiten(adv, m) * m, returns


policy, critic = gpt2_init(GPT(a)), gpt2_init(GPT(a, value_head=True))
reference = GPT(a); reference.load_state_dict(policy.state_dict())
critic.load_state_dict(policy.state_dict(), strict=False)
actor_opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
critic_opt = torch.optim.AdamW(critic.parameters(), lr=3e-3)


def step():
    split, t0 = {}, time.perf_counter()
    prompts = [prompt() for _ in range(a.batch)]
    ids, out, lengths, rollout_logps = generate(policy, prompts)
    t1 = time.perf_counter(); split['gen'] = t1 - t0
    scores = torch.tensor([score(q, bytes(o[:n].tolist()).decode('latin-1').rstrip('\n'),
                                 n < a.response or o[n - 1] == NEWLINE)
                           for q, o, n in zip(prompts, out, lengths.tolist())])
    t2 = time.perf_counter(); split['reward'] = t2 - t1
    seq, pos, mask, m = sequence_inputs(ids, out, lengths)
    with torch.no_grad():
        old = rollout_logps * m
        if a.recompute:
            old, _ = response_log_probs(policy, seq, pos, mask)
        t3 = time.perf_counter()
        if a.recompute: split['old_log_prob'] = t3 - t2
        ref, _ = response_log_probs(reference, seq, pos, mask)
        t4 = time.perf_counter(); split['ref'] = t4 - t3
        values = critic(seq, pos, mask)[0][:, -a.response - 1:-1] * m
        t5 = time.perf_counter(); split['values'] = t5 - t4
        rewards = -KL_COEF * (old - ref) * m
        rewards[torch.arange(a.batch), lengths - 1] += scores
        adv, returns = gae(rewards, values, m)
    t6 = time.perf_counter(); split['adv'] = t6 - t5
    for _ in range(a.epochs):
        for mb in torch.randperm(a.batch).split(a.mini_batch):
            v, _ = critic(seq[mb], pos[mb], mask[mb])
            v = v[:, -a.response - 1:-1]
            vc = values[mb] + (v - values[mb]).clamp(-CLIP_V, CLIP_V)
            loss = 0.5 * masked_mean(torch.max((v - returns[mb]) ** 2, (vc - returns[mb]) ** 2), m[mb])
            critic_opt.zero_grad(set_to_none=True); loss.backward()
            nn.utils.clip_grad_norm_(critic.parameters(), 1.0); critic_opt.step()
    t7 = time.perf_counter(); split['update_critic'] = t7 - t6
    for _ in range(a.epochs):
        for mb in torch.randperm(a.batch).split(a.mini_batch):
            logp, full = response_log_probs(policy, seq[mb], pos[mb], mask[mb])
            ratio = torch.exp((logp - old[mb]).clamp(-20, 20))
            loss = masked_mean(torch.max(-adv[mb] * ratio,
                                         -adv[mb] * ratio.clamp(1 - CLIP, 1 + CLIP)), m[mb])
            entropy = masked_mean(-(full.exp() * full).sum(-1), m[mb]).detach()  # actor/entropy
            actor_opt.zero_grad(set_to_none=True); loss.backward()
            nn.utils.clip_grad_norm_(policy.parameters(), 1.0); actor_opt.step()
    split['update_actor'] = time.perf_counter() - t7
    split['step'] = time.perf_counter() - t0
    return split, lengths.float().mean().item()


step()  # warm-up
rows = [step() for _ in range(a.steps)]
med = {k: statistics.median(r[0][k] for r in rows) for k in rows[0][0]}
print(json.dumps({'ref': f'pytorch-{torch.__version__}', 'threads': a.threads,
                  'params': sum(q.numel() for q in policy.parameters()),
                  'sequences': a.batch, 'response_length_mean': rows[-1][1],
                  'step_s': med['step'], 'timing_s': med}))
