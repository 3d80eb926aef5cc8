# solution: amp-train-step
# fails: amp-train-step-autocast amp-train-step-scaled-backward amp-train-step-scaler-step amp-train-step-update amp-train-step-zero-grad amp-train-step-skip-inf amp-train-step-returns amp-train-step-converges
# says: before scaler.step(optimizer)
# Typical mistake: scaler.update() before scaler.step(optimizer): GradScaler asserts on the first call.
import torch


def amp_train_step(model, x, y, loss_fn, optimizer, scaler, device_type, dtype):
    optimizer.zero_grad()
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.update()
    scaler.step(optimizer)
    return loss.item()
