# solution: amp-train-step
# fails: amp-train-step-autocast
# says: autocast
# Typical mistake: the source's torch.cuda.amp.autocast (deprecated): on a CPU it disables itself.
import warnings

import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with warnings.catch_warnings():  # keep the test output clean; the warning itself is shown in the chapter
        warnings.simplefilter("ignore")
        ctx = torch.cuda.amp.autocast(dtype=dtype)
    with ctx:
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
