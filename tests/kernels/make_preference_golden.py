#!/usr/bin/python3
"""Writes the golden values of troupe's preference losses (kernels/preference_loss): fixed
per-pair log-probs, and what TRL's DPOTrainer (loss_type sigmoid with and without
label_smoothing, hinge, ipo; sigmoid with rpo_alpha) and RewardTrainer (Bradley-Terry with a margin) give for them in
PyTorch float64, the gradients by autograd. The formulas are written here from TRL's
definitions (docs/alignment.md cites them), with the same PyTorch operations.

Usage: make_preference_golden.py OUT.json     (Debian python3-torch; run with /usr/bin/python3)
"""
import json, sys
import torch
import torch.nn.functional as F

torch.manual_seed(11)
P = 6
policy_chosen = (torch.randn(P, dtype=torch.float64) * 3 - 12).requires_grad_()
policy_rejected = (torch.randn(P, dtype=torch.float64) * 3 - 12).requires_grad_()
with torch.no_grad():
    policy_chosen[2] += 30  # a pair the hinge no longer pushes: beta * logits > 1
reference_chosen = torch.randn(P, dtype=torch.float64) * 3 - 12
reference_rejected = torch.randn(P, dtype=torch.float64) * 3 - 12
chosen_tokens = torch.tensor([3, 7, 1, 12, 5, 9], dtype=torch.float64)
rejected_tokens = torch.tensor([4, 2, 6, 12, 8, 1], dtype=torch.float64)
beta = 0.1
out = {
    "policy_chosen": policy_chosen.tolist(), "policy_rejected": policy_rejected.tolist(),
    "reference_chosen": reference_chosen.tolist(),
    "reference_rejected": reference_rejected.tolist(),
    "chosen_tokens": chosen_tokens.tolist(), "rejected_tokens": rejected_tokens.tolist(),
    "beta": beta, "cases": {},
}


def dpo(loss_type, label_smoothing=0.0, rpo_alpha=0.0):
    pc, pr, rc, rr = policy_chosen, policy_rejected, reference_chosen, reference_rejected
    if loss_type == "ipo":  # TRL averages the log-probs over the completion for IPO
        pc, pr = pc / chosen_tokens, pr / rejected_tokens
        rc, rr = rc / chosen_tokens, rr / rejected_tokens
    logits = (pc - pr) - (rc - rr)
    if loss_type == "sigmoid":
        losses = (-F.logsigmoid(beta * logits) * (1 - label_smoothing)
                  - F.logsigmoid(-beta * logits) * label_smoothing)
    elif loss_type == "hinge":
        losses = torch.relu(1 - beta * logits)
    else:
        losses = (logits - 1 / (2 * beta)) ** 2
    if rpo_alpha:  # RPO: the chosen response's NLL per token (TRL: over the batch's tokens)
        losses = losses + rpo_alpha * (-policy_chosen / chosen_tokens)
    dchosen, drejected = torch.autograd.grad(losses.sum(), [policy_chosen, policy_rejected])
    return {"loss": losses.tolist(), "dchosen": dchosen.tolist(), "drejected": drejected.tolist(),
            "reward_chosen": (beta * (pc - rc)).tolist(),
            "reward_rejected": (beta * (pr - rr)).tolist()}


out["cases"]["sigmoid"] = dpo("sigmoid")
out["cases"]["cdpo"] = dpo("sigmoid", 0.2)
out["cases"]["hinge"] = dpo("hinge")
out["cases"]["ipo"] = dpo("ipo")
out["cases"]["rpo"] = dpo("sigmoid", rpo_alpha=0.5)

chosen = (torch.randn(P, dtype=torch.float64) * 2).requires_grad_()
rejected = (torch.randn(P, dtype=torch.float64) * 2).requires_grad_()
margin = torch.tensor([0.0, 0.5, 1.0, 0.0, 2.0, 0.25], dtype=torch.float64)
losses = -F.logsigmoid(chosen - rejected - margin)
dc, dr = torch.autograd.grad(losses.sum(), [chosen, rejected])
out["bradley_terry"] = {"chosen": chosen.tolist(), "rejected": rejected.tolist(),
                        "margin": margin.tolist(), "loss": losses.tolist(),
                        "dchosen": dc.tolist(), "drejected": dr.tolist()}
json.dump(out, open(sys.argv[1], "w"), indent=1)
