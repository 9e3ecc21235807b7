#!/usr/bin/python3
"""Writes the golden values of troupe's RL math (kernels/policy_loss, value_loss, kl_penalty,
loss_aggregation and apps/rlhf/advantages, kl_controller): fixed inputs, and what veRL's
core_algos formulas give for them in PyTorch float32, gradients by autograd. The formulas are
written here from their definitions (docs/rlhf.md, ../shared/research/rlhf.md section 3), with
the same PyTorch operations, so that ties and clamps take autograd's paths.

Usage: make_rl_golden.py OUT.json     (Debian python3-torch; run with /usr/bin/python3)
"""
import json, sys
import torch

torch.manual_seed(7)
R, T = 6, 7
lengths = [7, 4, 1, 5, 3, 6]
mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(T)] for n in lengths])
group = [7, 7, 7, 3, 3, 9]  # a group of three, of two, and one alone

log_prob = torch.randn(R, T) * 1.5 - 2
old_log_prob = log_prob + torch.randn(R, T)
old_log_prob[0, 1] = log_prob[0, 1] + 25.0  # past the ratio's clamp at -20
old_log_prob[1, 2] = log_prob[1, 2] - 25.0  # past +20
ref_log_prob = log_prob + torch.randn(R, T) * 2
advantages = torch.randn(R, T)
for r, t in [(2, 0), (3, 1)]:  # dual-clipped: A < 0 and a ratio above clip_ratio_c, inside the clamp
    advantages[r, t] = -0.8
    old_log_prob[r, t] = log_prob[r, t] - 1.5
values = torch.randn(R, T)
returns = torch.randn(R, T)
vpreds = values + torch.randn(R, T)
scores = torch.rand(R)
token_level_rewards = torch.zeros(R, T)
for r, n in enumerate(lengths):
    token_level_rewards[r, n - 1] = scores[r]
token_level_rewards += 0.1 * torch.randn(R, T) * mask  # dense parts too


def masked_mean(x, m, axis=None):
    return (torch.where(m.bool(), x, 0.0) * m).sum(axis) / (m.sum(axis) + 1e-8)


def masked_var(x, m):
    mean = masked_mean(x, m)
    var = masked_mean((x - mean) ** 2, m)
    n = m.sum()
    return var * n / (n - 1)


def masked_whiten(x, m):
    return (x - masked_mean(x, m)) * torch.rsqrt(masked_var(x, m) + 1e-8)


def agg(loss, m, mode):
    if mode == "token-mean":
        return masked_mean(loss, m)
    if mode == "seq-mean-token-sum":
        return (loss * m).sum(-1).mean()
    if mode == "seq-mean-token-mean":
        return ((loss * m).sum(-1) / m.sum(-1)).mean()
    if mode == "seq-mean-token-sum-norm":
        return (loss * m).sum() / m.shape[-1]
    raise ValueError(mode)


def policy_loss(lp, mode, low=0.2, high=0.28, c=3.0):
    d = torch.clamp(lp - old_log_prob, -20.0, 20.0)
    ratio = torch.exp(d)
    l1 = -advantages * ratio
    l2 = -advantages * torch.clamp(ratio, 1 - low, 1 + high)
    lc = torch.maximum(l1, l2)
    l3 = -advantages * c
    l = torch.where(advantages < 0, torch.min(l3, lc), lc)
    return (agg(l, mask, mode), masked_mean(torch.gt(l2, l1).float(), mask),
            masked_mean(-d, mask), masked_mean(torch.gt(lc, l3).float() * (advantages < 0).float(), mask))


def kl(lp, ref, kind):
    if kind == "kl":
        return lp - ref
    if kind == "abs":
        return (lp - ref).abs()
    if kind == "mse":
        return 0.5 * (lp - ref).square()
    u = torch.clamp(ref - lp, -20, 20)
    return torch.clamp(torch.exp(u) - u - 1, -10, 10)


def flat(x):
    return [float(v) for v in x.reshape(-1).tolist()]


out = {"rows": R, "cols": T, "group": group,
       "inputs": {k: flat(v) for k, v in dict(mask=mask, log_prob=log_prob, old_log_prob=old_log_prob,
                                                ref_log_prob=ref_log_prob, advantages=advantages,
                                                values=values, returns=returns, vpreds=vpreds,
                                                scores=scores, token_level_rewards=token_level_rewards).items()},
       "policy_loss": {}, "kl": {}}

for mode in ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]:
    lp = log_prob.clone().requires_grad_(True)
    loss, clipfrac, ppo_kl, lower = policy_loss(lp, mode)
    loss.backward()
    out["policy_loss"][mode] = {"clip": {"low": 0.2, "high": 0.28, "dual": 3.0},
                                "pg_loss": float(loss), "pg_clipfrac": float(clipfrac),
                                "ppo_kl": float(ppo_kl), "pg_clipfrac_lower": float(lower),
                                "dlog_prob": flat(lp.grad)}

vp = vpreds.clone().requires_grad_(True)
lo, hi = values - 0.5, values + 0.5
vclip = torch.max(torch.min(vp, hi), lo)
vf1, vf2 = (vp - returns) ** 2, (vclip - returns) ** 2
vf_loss = 0.5 * agg(torch.max(vf1, vf2), mask, "token-mean")
vf_loss.backward()
out["value_loss"] = {"cliprange_value": 0.5, "vf_loss": float(vf_loss),
                     "vf_clipfrac": float(masked_mean(torch.gt(vf2, vf1).float(), mask)),
                     "dvpreds": flat(vp.grad)}

for kind in ["kl", "abs", "mse", "low_var_kl"]:
    lp = log_prob.clone().requires_grad_(True)
    k = kl(lp, ref_log_prob, kind)
    k.sum().backward()
    out["kl"][kind] = {"kl": flat(k.detach()), "dkl": flat(lp.grad)}

out["masked_whiten"] = flat(masked_whiten(advantages, mask))

gae = {}
for gamma, lam in [(1.0, 1.0), (0.99, 0.95)]:
    nextvalues, lastgaelam, rev = 0, 0, []
    for t in reversed(range(T)):
        delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * mask[:, t] + (1 - mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * mask[:, t] + (1 - mask[:, t]) * lastgaelam
        rev.append(lastgaelam)
    adv = torch.stack(rev[::-1], dim=1)
    gae[f"{gamma},{lam}"] = {"gamma": gamma, "lam": lam, "returns": flat(adv + values),
                             "advantages": flat(masked_whiten(adv, mask))}
out["gae"] = gae

s = token_level_rewards.sum(-1)
def groups():
    ids = {}
    for r, g in enumerate(group):
        ids.setdefault(g, []).append(r)
    return ids.values()

for norm in [True, False]:
    a = torch.zeros(R)
    for rows in groups():
        x = s[rows]
        mean, std = (x.mean(), x.std()) if len(rows) > 1 else (torch.tensor(0.0), torch.tensor(1.0))
        a[rows] = (x - mean) / (std + 1e-6) if norm else x - mean
    out["grpo_std" if norm else "grpo_no_std"] = flat(a.unsqueeze(-1) * mask)

a = s.clone()
for rows in groups():
    n = len(rows)
    if n > 1:
        a[rows] = s[rows] * n / (n - 1) - s[rows].mean() * n / (n - 1)
out["rloo"] = flat(a.unsqueeze(-1) * mask)

gamma = 0.99
ret = torch.zeros(R, T)
running = 0
for t in reversed(range(T)):
    running = token_level_rewards[:, t] + gamma * running
    ret[:, t] = running
    running = running * mask[:, t]
out["reinforce_plus_plus"] = {"gamma": gamma, "returns": flat(ret),
                              "advantages": flat(masked_whiten(ret, mask) * mask)}

b = s.clone()
for rows in groups():
    b[rows] = s[rows] - (s[rows].mean() if len(rows) > 1 else 0.0)
b = b.unsqueeze(-1).tile([1, T]) * mask
out["reinforce_plus_plus_baseline"] = flat(masked_whiten(b, mask) * mask)

tls = torch.zeros(R, T)
for r, n in enumerate(lengths):
    tls[r, n - 1] = scores[r]
kld = kl(old_log_prob, ref_log_prob, "kl") * mask
out["kl_in_reward"] = {"beta": 0.1, "token_level_scores": flat(tls),
                       "rewards": flat(tls - 0.1 * kld),
                       "current_kl": float(torch.mean(masked_mean(kld, mask, axis=-1)))}

value, seen = 0.2, []
for current_kl in [0.05, 0.3, 0.11, 0.09]:
    err = min(max(current_kl / 0.1 - 1, -0.2), 0.2)
    value *= 1 + err * 256 / 1000
    seen.append(value)
out["adaptive_kl"] = {"kl_coef": 0.2, "target_kl": 0.1, "horizon": 1000, "n_steps": 256,
                      "current_kl": [0.05, 0.3, 0.11, 0.09], "values": seen}

# GSPO (veRL's compute_policy_loss_gspo): old log-probs that put each response's mean log-ratio
# inside the clip range, below it, above it, past the clamp at 10, at 0, and on a row of one token.
shift = torch.tensor([0.05, -0.3, 0.5, 11.0, 0.0, 0.1])
wobble = 0.2 * torch.sin(torch.arange(T, dtype=torch.float32))
gspo_old = log_prob - shift.unsqueeze(-1) + wobble * mask
lp = log_prob.clone().requires_grad_(True)
d = lp - gspo_old
seq_d = (d * mask).sum(-1) / mask.sum(-1).clamp(min=1)
log_s = torch.clamp(lp - lp.detach() + seq_d.detach().unsqueeze(-1), max=10.0)
s_ratio = torch.exp(log_s)
g1 = -advantages * s_ratio
g2 = -advantages * torch.clamp(s_ratio, 1 - 0.2, 1 + 0.28)
gspo = agg(torch.maximum(g1, g2), mask, "seq-mean-token-mean")
gspo.backward()
out["gspo"] = {"clip": {"low": 0.2, "high": 0.28}, "old_log_prob": flat(gspo_old),
               "pg_loss": float(gspo), "pg_clipfrac": float(masked_mean(torch.gt(g2, g1).float(), mask)),
               "ppo_kl": float(masked_mean(-d.detach(), mask)), "dlog_prob": flat(lp.grad)}

json.dump(out, open(sys.argv[1], "w"), indent=1)
