"""Does the signal F-reg learns from separate right pseudo-labels from wrong ones? (docs/studies/ssl_limit.md, 54.2)

    python benchmarks/feddure_signal.py [--layout iid|dir] [--steps 100 400] [--batches 8] [--seed 0] [--lr 0.01]

F-reg's weights move only through Eq. (5)'s hyper-gradient. To first order in η_s, raising the weight H_i of
unlabelled row i changes the labelled loss after the virtual step (Eq. 4) by ``∂L(φ⁻)/∂H_i = −(η_s/n)·s_i`` with
``s_i = ⟨∇_φ CE(y, f(x; φ)), ∇_φ CE(ŷ_i, f(T_s u_i; φ))⟩`` (x, y the labelled batch, n the unlabelled rows), so
F-reg's step raises the weight of the rows with s_i > 0 and lowers the others. F-reg learns from s_i alone:
where s_i barely separates right pseudo-labels from wrong ones, F-reg (whatever its shape) has little to learn
the separation from, even when its input, the softmax, carries it.

For device 0 of ``scenarios/label_scarce_cpu.toml`` (2 devices, ``small_cnn``, 50 labels and 550 unlabelled
images a device), a model trained ``--steps`` SGD steps (``--lr``, 0.01 unless set; B = 10) on the device's
labels stands in for φ = θ_g at a round's start (momentum 0.9, the scenario's). Over ``--batches`` steps of
FedDure's sampling (B = 10 labelled, μB = 70 unlabelled rows, ŷ = argmax f(T_w u; φ), Eq. 1) it scores, against
pseudo-label correctness [ŷ_i = y_i] (the hidden labels, measurement only), the AUC of: s_i; the confidence max
softmax f(T_w u_i; φ) (what FixMatch thresholds); and max softmax f(T_s u_i; φ) (F-reg's input, Eq. 6).
One torch thread, float32.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from edgesim.learning.augment import make_augmentation
from edgesim.learning.context import build_context
from edgesim.scenarios.schema import load_scenario


def auc(score: torch.Tensor, right: torch.Tensor) -> float:
    """The chance a right row scores above a wrong one (ties count ½; Hanley & McNeil 1982); NaN without both."""
    r, w = score[right], score[~right]
    if not len(r) or not len(w):
        return float("nan")
    diff = r.unsqueeze(1) - w.unsqueeze(0)
    return float(((diff > 0).float() + 0.5 * (diff == 0).float()).mean())


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layout", default="iid", choices=("iid", "dir"))
    p.add_argument("--steps", type=int, nargs="+", default=[100, 400])
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.01)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    sc = load_scenario("scenarios/label_scarce_cpu.toml", [f'data.partition="feddure_{a.layout}_{a.layout}"',
                                                            'train.precision="float32"'])
    ctx = build_context(sc.seed, sc.learning["data"], sc.learning["train"], sc.learning["run"], sc.workload,
                        sc.system.n_devices)
    c = ctx.clients[0]
    model = ctx.model
    weak = make_augmentation("weak", ctx.input_shape, ctx.data_mean, ctx.data_std, ctx.hflip_preserves_labels)
    strong = make_augmentation("strong", ctx.input_shape, ctx.data_mean, ctx.data_std, ctx.hflip_preserves_labels)
    gen = torch.Generator().manual_seed(a.seed)

    def view(aug, x):
        return aug.apply(x, aug.draw(len(x), gen))

    params = {k: v.detach().clone() for k, v in ctx.init_state().items()}
    names = [k for k, _ in model.named_parameters()]

    def logits(ps, x):
        return functional_call(model, {**params, **ps}, (x,))

    def ce(t, x, y):
        return F.cross_entropy(logits(t, x), y)

    print("| supervised steps | start model: all unlabelled rows right (%) | rows | AUC of s_i | AUC of confidence, "
          "weak view | AUC of confidence, strong view (F-reg's input) | share of rows with s_i > 0: right | wrong |")
    print("|---|---|---|---|---|---|---|---|")
    done, buf = 0, {}
    for target in sorted(a.steps):
        while done < target:  # supervised SGD on the device's labels (FedAvg*'s step)
            idx = torch.randint(len(c.y_lab), (10,), generator=gen)
            th = {k: params[k] for k in names}
            g = grad(ce)(th, view(weak, c.x_lab[idx]), c.y_lab[idx])
            buf = {k: 0.9 * buf[k] + g[k] for k in names} if buf else g  # heavy-ball momentum 0.9 (the scenario's)
            params.update({k: th[k] - a.lr * buf[k] for k in names})
            done += 1
        th = {k: params[k] for k in names}
        with torch.no_grad():
            start_right = float((logits(th, c.x_unl).argmax(-1) == c.y_unl_hidden).float().mean())
        scores, conf_w, conf_s, right = [], [], [], []
        order = torch.randperm(len(c.y_unl_hidden), generator=gen)
        for b in range(a.batches):
            rows = order[(b * 70) % len(order):][:70]
            idx = torch.randint(len(c.y_lab), (10,), generator=gen)
            x, y, u, truth = view(weak, c.x_lab[idx]), c.y_lab[idx], c.x_unl[rows], c.y_unl_hidden[rows]
            uw, us = view(weak, u), view(strong, u)
            with torch.no_grad():
                pw = F.softmax(logits(th, uw), -1)
                ps_ = F.softmax(logits(th, us), -1)
            y_hat = pw.argmax(-1)
            g_lab = grad(ce)(th, x, y)

            def row_loss(t, ui, yi):
                return F.cross_entropy(logits(t, ui.unsqueeze(0)), yi.unsqueeze(0))

            g_rows = vmap(grad(row_loss), in_dims=(None, 0, 0))(th, us, y_hat)
            s = sum((g_rows[k] * g_lab[k]).flatten(1).sum(1) for k in names)
            scores.append(s)
            conf_w.append(pw.max(-1).values)
            conf_s.append(ps_.max(-1).values)
            right.append(y_hat == truth)
        s, cw, cs, r = (torch.cat(v) for v in (scores, conf_w, conf_s, right))
        pos_r = float((s[r] > 0).float().mean()) if r.any() else float("nan")
        pos_w = float((s[~r] > 0).float().mean()) if (~r).any() else float("nan")
        print(f"| {target} | {100 * start_right:.1f} | {len(s)} ({int(r.sum())} right) | {auc(s, r):.3f} | "
              f"{auc(cw, r):.3f} | {auc(cs, r):.3f} | {100 * pos_r:.0f} % | {100 * pos_w:.0f} % |")


if __name__ == "__main__":
    main()
