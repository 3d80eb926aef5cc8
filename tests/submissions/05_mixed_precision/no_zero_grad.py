# solution: amp-train-step
# fails: amp-train-step-zero-grad
# says: zero_grad
# Typical mistake: gradients are never cleared, so they pile up from step to step.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
