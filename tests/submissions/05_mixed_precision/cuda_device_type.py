# solution: amp-train-step
# fails: amp-train-step-autocast
# says: device_type
# Typical mistake: a hard-coded torch.autocast("cuda", ...): on a CPU it disables itself (with a warning).
import warnings

import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with warnings.catch_warnings():  # keep the test output clean: a CPU build warns that CUDA autocast is off
        warnings.simplefilter("ignore")
        ctx = torch.autocast("cuda", dtype=dtype)
    with ctx:
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
