# solution: amp-train-step
# fails: amp-train-step-scaled-backward amp-train-step-scaler-step amp-train-step-update amp-train-step-skip-inf
# says: GradScaler of its own
# Typical mistake: a new GradScaler made inside the step instead of using the scaler argument.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    scaler = torch.amp.GradScaler(device_type)
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
