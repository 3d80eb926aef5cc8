# solution: amp-train-step
# fails: amp-train-step-scaler-step amp-train-step-skip-inf
# says: scaler.step(optimizer)
# Typical mistake: unscale, then call optimizer.step() yourself: an inf gradient is never skipped.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    optimizer.step()
    scaler.update()
    return loss.item()
