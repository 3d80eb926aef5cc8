# solution: amp-train-step
# fails: amp-train-step-autocast
# says: dtype
# Typical mistake: autocast with a hard-coded dtype instead of the dtype argument.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=torch.bfloat16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
